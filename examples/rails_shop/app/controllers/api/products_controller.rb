# frozen_string_literal: true

module Api
  # CRUD for products.
  class ProductsController < ApplicationController
    def index
      products = params[:all] == "true" ? Product.order(:id) : Product.available.order(:id)
      render json: products.map { |p| ProductSerializer.new(p).as_json }
    end

    def show
      render json: ProductSerializer.new(Product.find(params[:id])).as_json
    end

    def create
      product = Product.new(product_params)
      if product.save
        render json: ProductSerializer.new(product).as_json, status: :created
      else
        render json: { errors: product.errors.full_messages }, status: :unprocessable_entity
      end
    end

    def update
      product = Product.find(params[:id])
      if product.update(product_params)
        render json: ProductSerializer.new(product).as_json
      else
        render json: { errors: product.errors.full_messages }, status: :unprocessable_entity
      end
    end

    def destroy
      product = Product.find(params[:id])
      if product.destroy
        head :no_content
      else
        render json: { errors: product.errors.full_messages }, status: :conflict
      end
    end

    private

    def product_params
      params.require(:product).permit(:name, :price_cents, :stock, :active)
    end
  end
end
