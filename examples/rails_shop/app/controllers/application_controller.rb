# frozen_string_literal: true

# Base API controller: every request needs the shop token in the X-Api-Token header.
class ApplicationController < ActionController::API
  API_TOKEN = ENV.fetch("SHOP_API_TOKEN", "test-token")

  before_action :authenticate!

  rescue_from ActiveRecord::RecordNotFound do
    render json: { error: "not found" }, status: :not_found
  end

  private

  def authenticate!
    token = request.headers["X-Api-Token"].to_s
    return if ActiveSupport::SecurityUtils.secure_compare(token, API_TOKEN)

    render json: { error: "unauthorized" }, status: :unauthorized
  end
end
