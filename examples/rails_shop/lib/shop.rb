# frozen_string_literal: true

# Shop domain errors and helpers that are not tied to Rails.
module Shop
  class Error < StandardError; end
  class OutOfStockError < Error; end
  class InvalidTransitionError < Error; end
  class InvalidDiscountError < Error; end
end
