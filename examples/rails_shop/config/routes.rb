# frozen_string_literal: true

Rails.application.routes.draw do
  namespace :api do
    resources :products, only: %i[index show create update destroy]
    resources :orders, only: %i[index show create]
  end
end
