# frozen_string_literal: true

# Someone who places orders.
class Customer < ApplicationRecord
  has_many :orders, dependent: :destroy

  validates :name, presence: true
  validates :email, presence: true, uniqueness: { case_sensitive: false },
                    format: { with: /\A[^@\s]+@[^@\s]+\z/ }

  before_validation :normalize_email

  def total_spent_cents
    orders.where(status: "paid").sum(:total_cents)
  end

  private

  def normalize_email
    self.email = email.to_s.strip.downcase
  end
end
