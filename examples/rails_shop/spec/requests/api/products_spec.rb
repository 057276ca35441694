# frozen_string_literal: true

require "rails_helper"

RSpec.describe "Api::Products", type: :request do
  let(:headers) { { "X-Api-Token" => "test-token" } }

  describe "GET /api/products" do
    it "rejects a request without the token" do
      get "/api/products"
      expect(response).to have_http_status(:unauthorized)
    end

    it "lists available products" do
      product = create(:product, name: "Lamp", price_cents: 1999)
      create(:product, :out_of_stock)
      get "/api/products", headers: headers
      expect(response).to have_http_status(:ok)
      expect(JSON.parse(response.body)).to eq(
        [{ "id" => product.id, "name" => "Lamp", "price" => "19.99 EUR", "available" => true }]
      )
    end
  end

  describe "POST /api/products" do
    # Weak on purpose: status only, no check of the stored record or the error path.
    it "creates a product" do
      post "/api/products", params: { product: { name: "Desk", price_cents: 5000, stock: 2 } },
                            headers: headers
      expect(response).to have_http_status(:created)
    end
  end
end
