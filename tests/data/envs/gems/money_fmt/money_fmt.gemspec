# frozen_string_literal: true

Gem::Specification.new do |s|
  s.name = "money_fmt"
  s.version = "0.1.0"
  s.summary = "Formats cents (a test gem built locally by Autopilot's tests)"
  s.authors = ["Test Autopilot"]
  s.license = "MIT"
  s.files = ["lib/money_fmt.rb"]
  s.required_ruby_version = ">= 2.7"
end
