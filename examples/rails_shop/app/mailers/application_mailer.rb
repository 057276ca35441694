# frozen_string_literal: true

# Base class of every mailer.
class ApplicationMailer < ActionMailer::Base
  default from: "shop@example.com"
end
