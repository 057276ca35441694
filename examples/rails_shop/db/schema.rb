# frozen_string_literal: true

ActiveRecord::Schema.define(version: 2024_01_01_000000) do
  create_table "customers", force: :cascade do |t|
    t.string "name", null: false
    t.string "email", null: false
    t.timestamps
  end
  add_index "customers", ["email"], unique: true

  create_table "products", force: :cascade do |t|
    t.string "name", null: false
    t.integer "price_cents", null: false, default: 0
    t.integer "stock", null: false, default: 0
    t.boolean "active", null: false, default: true
    t.timestamps
  end

  create_table "orders", force: :cascade do |t|
    t.references "customer", null: false
    t.references "product", null: false
    t.integer "quantity", null: false, default: 1
    t.integer "total_cents", null: false, default: 0
    t.string "status", null: false, default: "pending"
    t.timestamps
  end
end
