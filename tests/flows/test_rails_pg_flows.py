"""The PostgreSQL example end to end: the nightly writes a spec whose examples need the
database, the post-merge repair fixes a merged regression found by running the suite; both
with the real PostgreSQL server started for the run (each file job on its own database), the
real rspec in bwrap, the scripted model; nothing is left running afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tasks.services import processes_in
from tests.examples_repo import git, make_example_repo
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_nightly_rails import reply
from tests.flows.test_post_merge import is_surgeon
from tests.flows.test_post_merge_ci import RemoteBranches

pytestmark = pytest.mark.slow

SOURCE = "app/models/loan.rb"
SPEC = "spec/models/loan_spec.rb"
BOOK = "app/models/book.rb"
LOAN_SPEC = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe Loan, type: :model do
  let(:book) { create(:book, copies: 1) }

  def lend(to:, due:, **more)
    described_class.create!(book: book, borrower: to, due_on: due, **more)
  end

  describe "validations" do
    it "requires a borrower" do
      loan = described_class.new(book: book, borrower: "", due_on: Date.new(2024, 1, 10))
      expect(loan.valid?).to eq(false)
      expect(loan.errors[:borrower]).to eq(["can't be blank"])
    end

    it "refuses a loan when no copy is left" do
      lend(to: "Ada", due: Date.new(2024, 1, 10))
      loan = described_class.new(book: book, borrower: "Grace", due_on: Date.new(2024, 1, 10))
      expect(loan.valid?).to eq(false)
      expect(loan.errors[:book]).to eq(["has no copy left"])
    end
  end

  describe ".overdue" do
    it "lists the open loans past their due date" do
      late = lend(to: "Ada", due: Date.new(2024, 1, 1))
      described_class.create!(book: create(:book), borrower: "Bob", due_on: Date.new(2024, 2, 1))
      expect(described_class.overdue(Date.new(2024, 1, 15)).pluck(:id)).to eq([late.id])
    end
  end

  describe "#return!" do
    it "records the return time" do
      loan = lend(to: "Ada", due: Date.new(2024, 1, 1))
      at = Time.zone.local(2024, 1, 5, 12)
      loan.return!(at: at)
      expect(loan.reload.returned_at).to eq(at)
    end

    it "refuses to return a loan twice" do
      loan = lend(to: "Ada", due: Date.new(2024, 1, 1), returned_at: Time.zone.local(2024, 1, 2))
      expect { loan.return! }.to raise_error(ArgumentError, "loan already returned")
    end
  end

  describe "#days_overdue" do
    it "counts the days past the due date" do
      loan = described_class.new(book: book, borrower: "Ada", due_on: Date.new(2024, 1, 1))
      expect(loan.days_overdue(Date.new(2024, 1, 11))).to eq(10)
    end

    it "is zero before the due date" do
      loan = described_class.new(book: book, borrower: "Ada", due_on: Date.new(2024, 1, 20))
      expect(loan.days_overdue(Date.new(2024, 1, 11))).to eq(0)
    end
  end
end
"""
BLANK = " "  # a blank context line of a diff: a single space
SEARCH_FIX = f"""```diff
--- a/{BOOK}
+++ b/{BOOK}
@@ -11,3 +11,3 @@
   scope :tagged, ->(tag) {{ where("tags @> ?", [tag].to_json) }}
-  scope :search, ->(text) {{ where("title LIKE ?", "%#{{sanitize_sql_like(text)}}%") }}
+  scope :search, ->(text) {{ where("title ILIKE ?", "%#{{sanitize_sql_like(text)}}%") }}
{BLANK}
```
"""


def _services_left(before: set[Path]) -> list[Path]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [p for p in set(Path("/tmp").glob("ap-svc-*")) - before if p.exists()]
        busy = [p for p in set(Path("/tmp").glob("ap-svc-*")) - before if processes_in(str(p))]
        if not left and not busy:
            return []
        time.sleep(0.2)
    return left


def test_nightly_writes_a_database_spec_accepted_on_a_branch_and_proposed(
    tmp_path: Path,
    mistral_server: MistralServer,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
    forge: FakeForge,
) -> None:
    from flows.nightly import nightly

    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    repo = make_example_repo("rails_pg", tmp_path / "library")
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    forge.state.branches = RemoteBranches(bare)
    for name, value in {
        "KIND": "gitlab",
        "REPOSITORY": "acme/shop",
        "API_URL": f"{forge.url}/api/v4",
    }.items():
        monkeypatch.setenv(f"AUTOPILOT_FORGE__{name}", value)
    monkeypatch.setenv("AUTOPILOT_FORGE_TOKEN", forge.state.token)
    verdict = {"score": 0.8, "reasons": ["exact values"], "missing": []}
    mistral_server.add(
        Rule(name="judge", schema_name="judge_verdict", replies=[json.dumps(verdict)])
    )
    mistral_server.add(
        Rule(
            name="generate", contains=f"# Task: test `{SOURCE}`", replies=[reply((SPEC, LOAN_SPEC))]
        )
    )
    before = set(Path("/tmp").glob("ap-svc-*"))

    report = nightly(
        repo=str(repo), only=[SOURCE], max_iterations=2, archive=str(tmp_path / "a"), pr=True
    )

    assert report.baseline_error is None
    [outcome] = report.files
    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.coverage_after == 1.0
    assert report.branch and git(repo, "show", f"{report.branch}:{SPEC}") == LOAN_SPEC
    # Pushed to the remote and proposed as a GitLab merge request, the summary as its body.
    assert git(bare, "show", f"{report.branch}:{SPEC}") == LOAN_SPEC
    (req,) = forge.requests
    assert req.path == "/api/v4/projects/acme%2Fshop/merge_requests"
    description = req.body["description"]
    assert req.body["source_branch"] == report.branch and req.body["target_branch"] == "main"
    assert description.startswith("# Nightly of") and "Flow run:" in description
    assert report.pull_request and report.pull_request.startswith("http"), report.pull_request
    assert report.push_error is None
    assert _services_left(before) == []


def test_repair_finds_the_regression_by_running_the_suite_and_fixes_it(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    from flows.post_merge import post_merge

    repo = make_example_repo("rails_pg", tmp_path / "library")
    book = repo / BOOK
    book.write_text(book.read_text().replace('"title ILIKE ?"', '"title LIKE ?"'))
    git(repo, "commit", "-qam", "Merge: plain LIKE")
    cause = "The merge made the title search case-sensitive (LIKE instead of ILIKE)."
    block = {"file_path": BOOK, "start_line": 1, "end_line": 20, "description": cause}
    diagnosis = {
        "root_cause": cause,
        "affected_code_blocks": [block],
        "repair_strategy": "Use ILIKE again.",
        "confidence": 0.9,
        "wrong_side": "code",
        "alternatives": [{"root_cause": "x", "repair_strategy": "y", "confidence": 0.1}],
    }
    mistral_server.add(
        Rule(name="diagnose", schema_name="diagnosis", replies=[json.dumps(diagnosis)])
    )
    mistral_server.add(Rule(name="surgeon", when=is_surgeon, replies=[SEARCH_FIX]))
    before = set(Path("/tmp").glob("ap-svc-*"))

    result = post_merge(repo=str(repo), archive=str(tmp_path / "a"), human_poll_s=1)

    assert result.failures == 1, result.report_errors
    [group] = result.groups
    assert group.outcome == "fixed", group.reasons
    assert result.branch and '"title ILIKE ?"' in git(repo, "show", f"{result.branch}:{BOOK}")
    assert _services_left(before) == []
