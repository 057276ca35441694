# frozen_string_literal: true

FactoryBot.define do
  factory :product do
    sequence(:name) { |n| "Widget #{n}" }
    price_cents { 1250 }
    stock { 10 }
    active { true }

    trait :out_of_stock do
      stock { 0 }
    end
  end
end
