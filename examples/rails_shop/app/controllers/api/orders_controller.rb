# frozen_string_literal: true

module Api
  # Lists and places orders.
  class OrdersController < ApplicationController
    def index
      orders = Order.recent.includes(:product, :customer)
      render json: orders.map { |o| OrderSerializer.new(o).as_json }
    end

    def show
      render json: OrderSerializer.new(Order.find(params[:id])).as_json
    end

    def create
      result = placer.call
      if result.success?
        render json: OrderSerializer.new(result.order).as_json, status: :created
      else
        render json: { error: result.error }, status: :unprocessable_entity
      end
    end

    private

    def placer
      OrderPlacer.new(
        customer: Customer.find(params.require(:customer_id)),
        product: Product.find(params.require(:product_id)),
        quantity: params.fetch(:quantity, 1),
        code: params[:code]
      )
    end
  end
end
