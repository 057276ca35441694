# frozen_string_literal: true

# The JSON shape of an order in the API.
class OrderSerializer
  include PriceHelper

  def initialize(order)
    @order = order
  end

  def as_json(*)
    {
      id: @order.id,
      status: @order.status,
      quantity: @order.quantity,
      total: format_price(@order.total_cents),
      product: ProductSerializer.new(@order.product).as_json,
      customer_email: @order.customer.email
    }
  end
end
