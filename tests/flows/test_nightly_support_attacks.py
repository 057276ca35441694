"""What a reply writes beyond its test file is gated, through a real nightly: a new
``tests/conftest.py`` whose report hook turns every failure into a pass, sent with a test file
whose assertions are wrong, is rejected and nothing reaches a branch (the attack that used to be
accepted with coverage 1.0, static 1.0 and judge 0.8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands.nightly import run
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import files_reply, judge_reply

pytestmark = pytest.mark.slow

#: Every assertion is wrong: each test fails on the project's own support files.
WRONG_TESTS = """\
from inventory.reports import render_table, stock_value_cents, summary
from inventory.stock import Item, Stock


def make_stock() -> Stock:
    stock = Stock()
    stock.register(Item("A1", "Apple", 150, reorder_level=5), 10)
    stock.register(Item("B2", "Bolt", 20, reorder_level=50), 40)
    return stock


def test_stock_value_cents():
    assert stock_value_cents(make_stock()) == 1


def test_summary():
    assert summary(make_stock()) == {"skus": 99}


def test_render_table():
    assert render_table(make_stock()) == "nothing"


def test_render_table_of_empty_stock():
    assert render_table(Stock()) == ""
"""

#: The attacker's support file: every failing call phase is reported as a pass.
REWRITING_CONFTEST = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
"""


def attack_reply() -> str:
    return (
        files_reply(WRONG_TESTS, "tests/test_reports.py")
        + "\n"
        + files_reply(REWRITING_CONFTEST, "tests/conftest.py")
    )


def test_a_conftest_that_rewrites_failures_is_rejected_and_nothing_is_committed(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[attack_reply()]))

    code = run(
        repo,
        only=["src/inventory/reports.py"],
        json_out=True,
        archive=str(tmp_path / "arch"),
        max_iterations=2,
    )

    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    [entry] = doc["files"]
    assert entry["verdict"] == "rejected", entry
    assert entry["gate"] == "static"
    assert any(
        r.startswith("tests/conftest.py:5: result-hook: ") and "pytest_runtest_makereport" in r
        for r in entry["reasons"]
    ), entry["reasons"]
    assert doc["branch"] is None
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    # The model was told which support file and line to take out, and was never judged.
    fix = [r for r in mistral_server.requests if "# Task: fix the tests" in r.text]
    assert fix and "tests/conftest.py:5 result-hook" in fix[0].text
    assert not any(r.schema_name == "judge_verdict" for r in mistral_server.requests)


def test_with_the_static_rule_turned_off_the_support_gate_still_rejects_it(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defence in depth: a hook the static rules would not know is caught by running. The
    tests fail on the project's own support files, so they need the new conftest; with it, a
    failing canary test written beside them is reported as passed."""
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "autopilot.toml").write_text('[gates]\nstatic_reject = ["no-assertion"]\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a project that turned the static gate down")
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[attack_reply()]))

    code = run(
        repo,
        only=["src/inventory/reports.py"],
        json_out=True,
        archive=str(tmp_path / "arch"),
        max_iterations=1,
    )

    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    [entry] = doc["files"]
    assert (entry["verdict"], entry["gate"]) == ("rejected", "support"), entry
    assert entry["reasons"][0] == (
        "tests/conftest.py changes how results are reported: a test that must fail "
        "(written beside tests/test_reports.py) was reported as passed"
    )
    assert any("tests/test_reports.py::test_summary" in r for r in entry["reasons"])
    assert doc["branch"] is None
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    assert not any(r.schema_name == "judge_verdict" for r in mistral_server.requests)
