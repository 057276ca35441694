"""The scripted demo model's replies, written for examples/rails_shop.

`app/models/customer.rb`: a first draft that does not load (a missing parenthesis), then, fed
RSpec's load error, a passing spec (with an extra blank line RuboCop's autocorrect removes).
`app/serializers/order_serializer.rb`: a spec that passes with full coverage but only checks that
keys exist, which the judge scores low; its reasons go back to the model, which keeps its spec:
rejected when the rounds run out, with the judge's reasons.
"""

from __future__ import annotations

import json

CUSTOMER = "app/models/customer.rb"
CUSTOMER_SPEC = "spec/models/customer_spec.rb"
SERIALIZER = "app/serializers/order_serializer.rb"
SERIALIZER_SPEC = "spec/serializers/order_serializer_spec.rb"
ORDERS_FACTORY = "spec/factories/orders.rb"

FACTORY_TEXT = """\
# frozen_string_literal: true

FactoryBot.define do
  factory :order do
    customer
    product
    quantity { 1 }
    total_cents { 1000 }
    status { "pending" }
  end
end
"""

CUSTOMER_GOOD = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe Customer, type: :model do
  describe "validations" do
    it "requires a name" do
      customer = build(:customer, name: "")
      expect(customer.valid?).to eq(false)
      expect(customer.errors[:name]).to eq(["can't be blank"])
    end

    it "rejects an email without an at sign" do
      customer = build(:customer, email: "ada.example.com")
      expect(customer.valid?).to eq(false)
      expect(customer.errors[:email]).to eq(["is invalid"])
    end

    it "rejects a duplicate email whatever its case" do
      create(:customer, email: "ada@example.com")
      customer = build(:customer, email: "ADA@example.com")
      expect(customer.valid?).to eq(false)
      expect(customer.errors[:email]).to eq(["has already been taken"])
    end
  end


  describe "email normalisation" do
    it "strips and downcases the email before validation" do
      customer = create(:customer, email: "  Ada@Example.COM ")
      expect(customer.email).to eq("ada@example.com")
    end
  end

  describe "#total_spent_cents" do
    it "sums the totals of paid orders only" do
      customer = create(:customer)
      create(:order, customer: customer, total_cents: 1500, status: "paid")
      create(:order, customer: customer, total_cents: 700, status: "paid")
      create(:order, customer: customer, total_cents: 9900, status: "pending")
      expect(customer.total_spent_cents).to eq(2200)
    end

    it "is zero without orders" do
      expect(create(:customer).total_spent_cents).to eq(0)
    end
  end
end
"""

#: The first draft: a missing parenthesis, so the file cannot even be loaded.
CUSTOMER_BROKEN = CUSTOMER_GOOD.replace(
    "expect(customer.total_spent_cents).to eq(2200)",
    "expect(customer.total_spent_cents.to eq(2200)",
).replace("  end\n\n\n  describe", "  end\n\n  describe")

SERIALIZER_WEAK = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe OrderSerializer do
  it "serializes an order" do
    customer = build(:customer, email: "ada@example.com")
    order = Order.new(id: 7, status: "paid", quantity: 2, total_cents: 2500,
                      product: build(:product), customer: customer)
    json = described_class.new(order).as_json
    expect(json.keys).to contain_exactly(:id, :status, :quantity, :total, :product,
                                         :customer_email)
  end
end
"""


def files_reply(intro: str, *files: tuple[str, str]) -> str:
    """A reply in the generator's format: a sentence, then each file's path and a ruby fence."""
    body = "\n".join(f"{path}\n```ruby\n{text}```\n" for path, text in files)
    return f"{intro}\n\n{body}"


def judge_reply(text: str) -> str:
    """The judge's JSON verdict for the spec the request carries."""
    if SERIALIZER_SPEC in text or "OrderSerializer" in text:
        verdict = {
            "score": 0.3,
            "reasons": ["the spec runs every line of as_json"],
            "missing": [
                "no value is checked: the total's formatting, the nested product, the email",
                "only the keys' presence is asserted",
            ],
        }
    else:
        verdict = {
            "score": 0.85,
            "reasons": ["exact values for every validation and the paid-orders total"],
            "missing": ["a customer whose email is blank"],
        }
    return json.dumps(verdict)


def answer(text: str, schema_name: str | None) -> str:
    """The scripted reply to a request whose messages read `text`."""
    if schema_name == "judge_verdict":
        return judge_reply(text)
    if f"# Task: fix the tests of `{SERIALIZER}`" in text:
        # The judge's reasons come back: this scripted model keeps its spec, so the file is
        # judged low again and rejected when its rounds run out.
        return files_reply(
            "The spec already runs every line of as_json; I kept it.",
            (SERIALIZER_SPEC, SERIALIZER_WEAK),
        )
    if f"# Task: fix the tests of `{CUSTOMER}`" in text:
        return files_reply(
            "The spec did not load: a parenthesis was missing after total_spent_cents.",
            (CUSTOMER_SPEC, CUSTOMER_GOOD),
        )
    if f"# Task: test `{CUSTOMER}`" in text:
        return files_reply(
            "I reused the customer factory and added an orders factory.",
            (CUSTOMER_SPEC, CUSTOMER_BROKEN),
            (ORDERS_FACTORY, FACTORY_TEXT),
        )
    if f"# Task: test `{SERIALIZER}`" in text:
        return files_reply("A spec for the order serializer.", (SERIALIZER_SPEC, SERIALIZER_WEAK))
    return "The scripted demo model has no reply written for this request."
