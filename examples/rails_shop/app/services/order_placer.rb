# frozen_string_literal: true

# Places an order: checks stock, applies a discount, reserves stock and mails the customer.
class OrderPlacer
  Result = Struct.new(:order, :error, keyword_init: true) do
    def success?
      error.nil?
    end
  end

  def initialize(customer:, product:, quantity:, code: nil, mailer: OrderMailer)
    @customer = customer
    @product = product
    @quantity = quantity.to_i
    @calculator = Shop::DiscountCalculator.new(code: code)
    @mailer = mailer
  end

  def call
    order = Order.transaction do
      @product.reserve!(@quantity)
      total = @calculator.total_cents(@product.price_cents, @quantity)
      Order.create!(customer: @customer, product: @product, quantity: @quantity,
                    total_cents: total)
    end
    @mailer.confirmation(order).deliver_now
    Result.new(order: order)
  rescue Shop::Error, ArgumentError, ActiveRecord::RecordInvalid => e
    Result.new(error: e.message)
  end
end
