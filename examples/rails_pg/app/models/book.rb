# frozen_string_literal: true

# A title the library holds, tagged (jsonb) and searchable (ILIKE).
class Book < ApplicationRecord
  has_many :loans, dependent: :restrict_with_error

  validates :title, presence: true
  validates :isbn, presence: true, format: { with: /\A\d{13}\z/ }
  validates :copies, numericality: { only_integer: true, greater_than_or_equal_to: 0 }

  scope :tagged, ->(tag) { where("tags @> ?", [tag].to_json) }
  scope :search, ->(text) { where("title ILIKE ?", "%#{sanitize_sql_like(text)}%") }

  def available_copies
    copies - loans.where(returned_at: nil).count
  end

  def available?
    available_copies.positive?
  end
end
