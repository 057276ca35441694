# frozen_string_literal: true

# Borrowers with overdue loans, most overdue first.
class OverdueReport
  def initialize(today: Date.current)
    @today = today
  end

  def rows
    Loan.overdue(@today).includes(:book).sort_by { |loan| -loan.days_overdue(@today) }.map do |loan|
      { borrower: loan.borrower, title: loan.book.title, days: loan.days_overdue(@today) }
    end
  end

  def total_days
    rows.sum { |row| row[:days] }
  end
end
