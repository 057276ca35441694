# frozen_string_literal: true

require "rails_helper"

RSpec.describe Book, type: :model do
  describe "validations" do
    it "requires a 13-digit isbn" do
      book = build(:book, isbn: "12345")
      expect(book.valid?).to eq(false)
      expect(book.errors[:isbn]).to eq(["is invalid"])
    end

    it "refuses a second book with the same isbn at the database" do
      create(:book, isbn: "9780000000001")
      duplicate = build(:book, isbn: "9780000000001")
      expect { duplicate.save!(validate: false) }.to raise_error(ActiveRecord::RecordNotUnique)
    end
  end

  describe ".tagged" do
    it "finds books by a jsonb tag" do
      ruby = create(:book, title: "Eloquent Ruby", tags: %w[ruby programming])
      create(:book, title: "Dune", tags: %w[fiction])
      expect(described_class.tagged("ruby").pluck(:id)).to eq([ruby.id])
    end
  end

  describe ".search" do
    it "matches titles case-insensitively" do
      create(:book, title: "The Pragmatic Programmer")
      expect(described_class.search("pragmatic").pluck(:title)).to eq(["The Pragmatic Programmer"])
      expect(described_class.count).to eq(1)
    end
  end
end
