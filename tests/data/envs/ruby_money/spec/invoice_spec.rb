# frozen_string_literal: true

require_relative "../lib/invoice"

RSpec.describe Invoice do
  it "formats the total with the locally built gem" do
    expect(described_class.new([[250, 2], [99, 1]]).total).to eq("5.99 EUR")
  end
end
