# frozen_string_literal: true

require_relative "boot"

require "rails"
require "active_model/railtie"
require "active_record/railtie"

Bundler.require(*Rails.groups)

module RailsPg
  # A lending library on PostgreSQL: books with jsonb tags, loans with due dates.
  class Application < Rails::Application
    config.load_defaults 6.1
    config.autoload_paths << Rails.root.join("lib")
    config.eager_load_paths << Rails.root.join("lib")
  end
end
