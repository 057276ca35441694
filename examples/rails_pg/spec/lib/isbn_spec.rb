# frozen_string_literal: true

require "rails_helper"

RSpec.describe Isbn do
  it "accepts a valid ISBN-13 with dashes" do
    expect(described_class.valid?("978-0-306-40615-7")).to eq(true)
  end

  it "rejects a wrong check digit" do
    expect(described_class.valid?("9780306406158")).to eq(false)
  end

  it "counts the books it stores in its own database" do
    Book.create!(title: "Isbn", isbn: "9780306406157")
    expect(Book.count).to eq(1)
  end
end
