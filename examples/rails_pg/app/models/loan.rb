# frozen_string_literal: true

# A book lent to a borrower until a due date.
class Loan < ApplicationRecord
  belongs_to :book

  validates :borrower, presence: true
  validate :book_available, on: :create

  scope :open, -> { where(returned_at: nil) }
  scope :overdue, ->(today = Date.current) { open.where("due_on < ?", today) }

  def return!(at: Time.current)
    raise ArgumentError, "loan already returned" if returned_at

    update!(returned_at: at)
  end

  def days_overdue(today = Date.current)
    return 0 if returned_at || due_on >= today

    (today - due_on).to_i
  end

  private

  def book_available
    errors.add(:book, "has no copy left") if book && !book.available?
  end
end
