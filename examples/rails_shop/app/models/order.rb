# frozen_string_literal: true

# One product bought by one customer.
class Order < ApplicationRecord
  STATUSES = %w[pending paid cancelled].freeze

  belongs_to :customer
  belongs_to :product

  validates :quantity, numericality: { only_integer: true, greater_than: 0 }
  validates :status, inclusion: { in: STATUSES }

  scope :recent, -> { order(created_at: :desc) }
  scope :paid, -> { where(status: "paid") }

  def pay!
    raise Shop::InvalidTransitionError, "order #{id} is #{status}" unless status == "pending"

    update!(status: "paid")
  end

  def cancel!
    raise Shop::InvalidTransitionError, "order #{id} is already paid" if status == "paid"

    update!(status: "cancelled")
  end
end
