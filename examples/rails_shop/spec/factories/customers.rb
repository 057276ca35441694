# frozen_string_literal: true

FactoryBot.define do
  factory :customer do
    name { "Ada Lovelace" }
    sequence(:email) { |n| "ada#{n}@example.com" }
  end
end
