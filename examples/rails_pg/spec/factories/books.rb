# frozen_string_literal: true

FactoryBot.define do
  factory :book do
    sequence(:title) { |n| "Book #{n}" }
    sequence(:isbn) { |n| format("978%<n>010d", n: n) }
    tags { [] }
    copies { 1 }
  end
end
