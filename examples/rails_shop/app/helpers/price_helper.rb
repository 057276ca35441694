# frozen_string_literal: true

# Money formatting shared by serializers and mailer views.
module PriceHelper
  def format_price(cents, currency: "EUR")
    raise ArgumentError, "cents must be an Integer" unless cents.is_a?(Integer)

    sign = cents.negative? ? "-" : ""
    units, rest = cents.abs.divmod(100)
    "#{sign}#{units}.#{rest.to_s.rjust(2, '0')} #{currency}"
  end
end
