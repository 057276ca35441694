# frozen_string_literal: true

require "rails_helper"

RSpec.describe Product, type: :model do
  it "is valid with the factory defaults" do
    expect(build(:product)).to be_valid
  end

  it "requires a name" do
    product = build(:product, name: "")
    expect(product).not_to be_valid
    expect(product.errors[:name]).to eq(["can't be blank"])
  end

  # Weak on purpose: a vague matcher and no check of which products come back.
  it "has available products" do
    create(:product)
    expect(described_class.available).to be_present
  end

  describe "#reserve!" do
    it "decrements the stock" do
      product = create(:product, stock: 3)
      expect { product.reserve!(2) }.to change { product.reload.stock }.from(3).to(1)
    end
  end
end
