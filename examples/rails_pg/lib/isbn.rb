# frozen_string_literal: true

# ISBN-13 check digits.
module Isbn
  module_function

  def valid?(isbn)
    digits = isbn.to_s.delete("-")
    return false unless digits.match?(/\A\d{13}\z/)

    sum = digits.chars.each_with_index.sum { |d, i| d.to_i * (i.even? ? 1 : 3) }
    (sum % 10).zero?
  end
end
