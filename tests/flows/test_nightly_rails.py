"""The nightly flow end to end on a copy of examples/rails_shop: real rspec, SimpleCov and RuboCop
in bwrap, the real model client against the scripted server, a real git branch and archive."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

pytestmark = pytest.mark.slow

SOURCE = "app/models/customer.rb"
SPEC = "spec/models/customer_spec.rb"
FACTORY = "spec/factories/orders.rb"

ORDERS_FACTORY = """\
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

GOOD_SPEC = """\
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

# The missing-parenthesis problem: the file cannot even be loaded.
BROKEN_SPEC = GOOD_SPEC.replace(
    "expect(customer.total_spent_cents).to eq(2200)",
    "expect(customer.total_spent_cents.to eq(2200)",
)


def reply(*files: tuple[str, str]) -> str:
    body = "\n".join(f"{path}\n```ruby\n{text}```\n" for path, text in files)
    return "I read the model, reused the customer factory and added an orders factory.\n\n" + body


def git_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "ls-files", "--stage"),
    )


def test_load_error_fixed_on_round_two_committed_on_a_branch_then_rerun_costs_nothing(
    tmp_path: Path,
    mistral_server: MistralServer,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.nightly import nightly

    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    before = git_state(repo)
    mistral_server.add(
        Rule(name="fix", contains="# Task: fix the tests", replies=[reply((SPEC, GOOD_SPEC))])
    )
    verdict = {"score": 0.8, "reasons": ["exact values"], "missing": ["blank email"]}
    mistral_server.add(
        Rule(name="judge", schema_name="judge_verdict", replies=[json.dumps(verdict)])
    )
    mistral_server.add(
        Rule(
            name="generate",
            contains=f"# Task: test `{SOURCE}`",
            replies=[reply((SPEC, BROKEN_SPEC), (FACTORY, ORDERS_FACTORY))],
        )
    )
    archive = tmp_path / "archive"

    report = nightly(repo=str(repo), only=[SOURCE], max_iterations=3, archive=str(archive))

    [outcome] = report.files
    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.iterations == 2
    assert outcome.coverage_before == 0.0 and outcome.coverage_after == 1.0
    assert outcome.judge_score == 0.8
    requests = [r for r in mistral_server.requests if r.schema_name is None]
    assert [r.rule for r in requests] == ["generate", "fix"]
    # The fix request carries RSpec's load error for the broken line.
    assert "Load error" in requests[1].text and "syntax error" in requests[1].text
    # The generate request had the context: the existing customer factory and the versions.
    assert "spec/factories/customers.rb" in requests[0].text and "rspec-core" in requests[0].text

    branch = f"autopilot/nightly-{dt.date.today().isoformat()}"
    assert report.branch == branch
    assert git(repo, "rev-parse", f"{branch}^").strip() == before[0].strip()
    assert git(repo, "show", f"{branch}:{SPEC}") == GOOD_SPEC
    assert git(repo, "show", f"{branch}:{FACTORY}") == ORDERS_FACTORY
    changed = git(repo, "diff", "--name-only", before[0].strip(), branch).split()
    assert sorted(changed) == [FACTORY, SPEC]
    assert git_state(repo) == before  # the user's HEAD, branch, tree and index are untouched

    run_dir = archive / "nightly" / dt.date.today().isoformat() / report.run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    keys = {o["key"] for o in manifest["objects"]}
    slug = "files/app__models__customer.rb"
    assert {
        f"{slug}/round-1-generate-prompt.md",
        f"{slug}/round-1-generate-reply-1.md",
        f"{slug}/round-2-fix-prompt.md",
        f"{slug}/generated/{SPEC}",
        f"{slug}/judge.json",
        "summary.json",
        "baseline/audit.json",
    } <= keys
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["files"][0]["verdict"] == "accepted"
    assert summary["model_calls"] == 3 and summary["tokens"] > 0

    # A re-run on the unchanged repository: no model call, the same files on a new branch.
    calls = len(mistral_server.requests)
    again = nightly(repo=str(repo), only=[SOURCE], max_iterations=3, archive=str(archive))
    assert len(mistral_server.requests) == calls
    assert again.model_calls == 0
    assert again.files[0].verdict == "accepted" and again.files[0].cached
    assert again.branch == f"{branch}-2"
    assert git(repo, "show", f"{branch}-2:{SPEC}") == GOOD_SPEC
