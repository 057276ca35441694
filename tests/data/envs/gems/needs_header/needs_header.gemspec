# frozen_string_literal: true

Gem::Specification.new do |s|
  s.name = "needs_header"
  s.version = "0.1.0"
  s.summary = "A native extension whose library no machine has (Autopilot's tests)"
  s.authors = ["Test Autopilot"]
  s.license = "MIT"
  s.files = ["lib/needs_header.rb", "ext/needs_header/extconf.rb"]
  s.extensions = ["ext/needs_header/extconf.rb"]
end
