# frozen_string_literal: true

module Shop
  # Applies a discount code and quantity breaks to a price in cents.
  class DiscountCalculator
    CODES = { "WELCOME10" => 10, "VIP20" => 20 }.freeze
    BULK_THRESHOLD = 10
    BULK_PERCENT = 5
    MAX_PERCENT = 25

    def initialize(code: nil)
      @code = code&.strip&.upcase
    end

    def percent_for(quantity)
      raise ArgumentError, "quantity must be positive" unless quantity.to_i.positive?

      percent = code_percent
      percent += BULK_PERCENT if quantity >= BULK_THRESHOLD
      [percent, MAX_PERCENT].min
    end

    def total_cents(unit_cents, quantity)
      raise ArgumentError, "unit price must not be negative" if unit_cents.negative?

      gross = unit_cents * quantity
      gross - (gross * percent_for(quantity) / 100)
    end

    private

    def code_percent
      return 0 if @code.nil? || @code.empty?

      CODES.fetch(@code) { raise InvalidDiscountError, "unknown discount code #{@code}" }
    end
  end
end
