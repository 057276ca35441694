# frozen_string_literal: true

# Mails sent to customers about their orders.
class OrderMailer < ApplicationMailer
  helper PriceHelper

  def confirmation(order)
    @order = order
    mail(to: order.customer.email, subject: "Order ##{order.id} confirmed")
  end
end
