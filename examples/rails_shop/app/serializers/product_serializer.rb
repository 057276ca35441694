# frozen_string_literal: true

# The JSON shape of a product in the API.
class ProductSerializer
  include PriceHelper

  def initialize(product)
    @product = product
  end

  def as_json(*)
    {
      id: @product.id,
      name: @product.name,
      price: format_price(@product.price_cents),
      available: @product.in_stock?
    }
  end
end
