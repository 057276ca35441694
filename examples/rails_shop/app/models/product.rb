# frozen_string_literal: true

# Something the shop sells; prices are whole cents.
class Product < ApplicationRecord
  has_many :orders, dependent: :restrict_with_error

  validates :name, presence: true, length: { maximum: 80 }
  validates :price_cents, numericality: { only_integer: true, greater_than: 0 }
  validates :stock, numericality: { only_integer: true, greater_than_or_equal_to: 0 }

  scope :available, -> { where(active: true).where("stock > 0") }

  def in_stock?(quantity = 1)
    active && stock >= quantity
  end

  def price
    price_cents / 100.0
  end

  def reserve!(quantity)
    raise ArgumentError, "quantity must be positive" unless quantity.positive?
    raise Shop::OutOfStockError, "only #{stock} #{name} left" unless in_stock?(quantity)

    update!(stock: stock - quantity)
  end
end
