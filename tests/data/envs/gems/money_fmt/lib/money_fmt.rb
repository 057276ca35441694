# frozen_string_literal: true

# Formats amounts in cents.
module MoneyFmt
  def self.cents(amount, currency = "EUR")
    format("%<units>.2f %<currency>s", units: amount / 100.0, currency: currency)
  end
end
