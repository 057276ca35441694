# frozen_string_literal: true

require "money_fmt"

# An invoice line total, formatted.
class Invoice
  def initialize(lines)
    @lines = lines
  end

  def total_cents
    @lines.sum { |price, quantity| price * quantity }
  end

  def total
    MoneyFmt.cents(total_cents)
  end
end
