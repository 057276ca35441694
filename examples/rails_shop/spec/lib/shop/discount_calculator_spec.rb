# frozen_string_literal: true

require "rails_helper"

RSpec.describe Shop::DiscountCalculator do
  it "applies a known code" do
    expect(described_class.new(code: "welcome10").percent_for(1)).to eq(10)
  end

  it "adds the bulk discount" do
    expect(described_class.new.percent_for(10)).to eq(5)
  end

  # Weak on purpose: no error paths (unknown code, bad quantity, negative price), no cap.
  it "computes a total" do
    expect(described_class.new(code: "VIP20").total_cents(1000, 2)).to be_positive
  end
end
