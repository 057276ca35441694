# frozen_string_literal: true

require "rails_helper"

RSpec.describe ProductSerializer do
  # Weak on purpose: only checks that keys exist, never their values.
  it "serializes a product" do
    json = described_class.new(build(:product)).as_json
    expect(json).to include(:name)
    expect(json[:available]).to be_truthy
  end
end
