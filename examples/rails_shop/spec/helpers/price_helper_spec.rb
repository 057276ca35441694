# frozen_string_literal: true

require "rails_helper"

RSpec.describe PriceHelper, type: :helper do
  it "formats cents with two decimals and the currency" do
    expect(helper.format_price(1250)).to eq("12.50 EUR")
  end

  it "formats negative amounts" do
    expect(helper.format_price(-5)).to eq("-0.05 EUR")
  end

  it "raises on a non-integer amount" do
    expect { helper.format_price(1.5) }.to raise_error(ArgumentError, "cents must be an Integer")
  end
end
