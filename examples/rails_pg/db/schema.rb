# frozen_string_literal: true

ActiveRecord::Schema.define(version: 2024_05_01_000000) do
  enable_extension "plpgsql"

  create_table "books", force: :cascade do |t|
    t.string "title", null: false
    t.string "isbn", null: false
    t.jsonb "tags", null: false, default: []
    t.integer "copies", null: false, default: 1
    t.timestamps
    t.index ["isbn"], name: "index_books_on_isbn", unique: true
    t.index ["tags"], name: "index_books_on_tags", using: :gin
  end

  create_table "loans", force: :cascade do |t|
    t.references "book", null: false, foreign_key: true
    t.string "borrower", null: false
    t.date "due_on", null: false
    t.datetime "returned_at"
    t.timestamps
  end
end
