"""The support gate on a copy of examples/py_inventory: real pytest, coverage and ruff in bwrap,
the real model client against the scripted server. A support file the tests do not need is
left out; one they need that changes an existing test's outcome is rejected naming the test;
one they need that changes nothing else is kept, and the judge is shown it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import GOOD, SPEC, _run, _settings, files_reply, judge_reply
from tests.tasks.generate.test_loop import project as project  # fixture

pytestmark = pytest.mark.slow

CONFTEST = "tests/conftest.py"

#: The reports tests, with their stock from a fixture of the conftest.
USES_FIXTURE = """\
from inventory.reports import render_table, stock_value_cents, summary
from inventory.stock import Stock


def test_stock_value_cents_sums_price_times_level(stock):
    assert stock_value_cents(stock) == 150 * 10 + 20 * 40


def test_summary_counts_and_formats(stock):
    assert summary(stock) == {"skus": 2, "units": 50, "value": "23.00 EUR", "reorder": ["B2"]}


def test_render_table_flags_reorder_lines(stock):
    lines = render_table(stock).splitlines()
    assert lines[0] == "SKU        NAME                   QTY"
    assert lines[1] == "A1         Apple                   10"
    assert lines[2] == "B2         Bolt                    40 !"


def test_render_table_of_empty_stock_is_the_header():
    assert render_table(Stock()) == "SKU        NAME                   QTY"
"""

STOCK_FIXTURE = """\
import pytest

from inventory.stock import Item, Stock


@pytest.fixture
def stock() -> Stock:
    stock = Stock()
    stock.register(Item("A1", "Apple", 150, reorder_level=5), 10)
    stock.register(Item("B2", "Bolt", 20, reorder_level=50), 40)
    return stock
"""

#: No cheat, but every test below it now sees list prices: an existing pricing test fails.
LIST_PRICES = (
    STOCK_FIXTURE
    + '''

@pytest.fixture(autouse=True)
def list_prices(monkeypatch):
    """The reports are checked at list price: no volume discount."""
    monkeypatch.setattr("inventory.pricing.VOLUME_DISCOUNTS", ())
'''
)

#: Breaks every other module's tests, but the reports tests do not use it.
BREAKS_OTHERS = """\
import pytest


@pytest.fixture(autouse=True)
def only_reports(request):
    if "test_reports" not in request.node.nodeid:
        raise RuntimeError("shared fixture broken for other modules")
"""


def _reply(tests: str, conftest: str) -> str:
    return files_reply(tests) + "\n" + files_reply(conftest, CONFTEST)


def test_a_needed_conftest_that_changes_an_existing_test_is_rejected_naming_it(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(1.0)]))
    mistral_server.add(Rule(replies=[_reply(USES_FIXTURE, LIST_PRICES)]))

    outcome = _run(project, mistral_server, _settings(), iterations=1)

    assert (outcome.verdict, outcome.gate) == ("rejected", "support"), outcome.reasons
    assert outcome.reasons[0] == (
        "tests/conftest.py changes the outcome of 1 existing test(s): "
        "tests/test_pricing.py::test_ten_units_get_five_percent (passed -> failed)"
    )
    assert outcome.reasons[1].startswith("the tests need tests/conftest.py: without it, ")
    assert "tests/test_reports.py::test_summary_counts_and_formats" in outcome.reasons[1]
    assert outcome.validation is not None and outcome.validation.passed  # its own tests pass
    assert not any(r.schema_name == "judge_verdict" for r in mistral_server.requests)
    assert [g.gate for g in outcome.gates][-2:] == ["static", "support"]


def test_a_needed_conftest_that_changes_nothing_else_is_kept_and_shown_to_the_judge(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(replies=[_reply(USES_FIXTURE, STOCK_FIXTURE)]))

    outcome = _run(project, mistral_server, _settings(), iterations=1)

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.files == {SPEC: USES_FIXTURE, CONFTEST: STOCK_FIXTURE}
    assert outcome.coverage_after == 1.0 and outcome.judge_score == 0.8
    support = next(g for g in outcome.gates if g.gate == "support")
    assert support.passed and support.reasons == []
    [judge] = [r for r in mistral_server.requests if r.schema_name == "judge_verdict"]
    user = judge.messages[-1]["content"]
    assert f"### Support file: {CONFTEST}\n" in user
    assert "def stock() -> Stock:" in user
    assert (project / CONFTEST).read_text() == STOCK_FIXTURE  # the copy as it is committed


def test_a_changed_conftest_the_tests_do_not_need_is_left_out(
    project: Path, mistral_server: MistralServer
) -> None:
    """The tests pass with the project's own conftest: the reply's change to it (which would
    break every other module) is never kept, and the run without it is the evidence."""
    (project / CONFTEST).write_text("# shared fixtures\n", encoding="utf-8")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(replies=[_reply(GOOD, BREAKS_OTHERS)]))

    outcome = _run(project, mistral_server, _settings(), iterations=1)

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.files == {SPEC: GOOD}
    support = next(g for g in outcome.gates if g.gate == "support")
    assert support.passed
    assert support.reasons == [
        "tests/conftest.py: left out, the tests pass with the project's own support files"
    ]
    assert (project / CONFTEST).read_text() == "# shared fixtures\n"
    assert outcome.validation is not None and outcome.validation.passed
    assert outcome.coverage_after == 1.0 and len(outcome.reruns) == 1
    [judge] = [r for r in mistral_server.requests if r.schema_name == "judge_verdict"]
    assert "Support file" not in judge.messages[-1]["content"]


@pytest.mark.parametrize(
    ("example", "toolchain", "test_file"),
    [
        ("py_inventory", "python-pytest", "tests/test_units.py"),
        ("rails_shop", "ruby-rspec", "spec/models/product_spec.rb"),
        ("node_orders", "node-jest", "src/util/money.test.ts"),
    ],
)
def test_each_stacks_canary_is_reported_by_its_real_tool_as_one_more_failure(
    tmp_path: Path, example: str, toolchain: str, test_file: str
) -> None:
    """What the support gate relies on: the canary loads with the file's own tests, runs, is
    found by its token, fails, and leaves the file's own tests as they were."""
    repo = make_example_repo(example, tmp_path / example)
    chain = get_toolchain(toolchain)
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=240),
        root=repo,
        toolchain_dirs=chain.sandbox_dirs(repo),
    )
    before = chain.run_specs(repo, [test_file], None, runner, coverage=False)
    assert before.loaded and before.examples, before.load_error
    text = (repo / test_file).read_text()
    canary = chain.canary_test(repo, test_file, text, "feedc0de")
    assert canary is not None
    (repo / test_file).write_text(canary)

    after = chain.run_specs(repo, [test_file], None, runner, coverage=False)

    found = [e for e in after.examples if "feedc0de" in e.id or "feedc0de" in e.name]
    assert [(e.file, e.status) for e in found] == [(test_file, "failed")], after.examples
    own = sorted((e.name, e.status) for e in after.examples if e not in found)
    assert own == sorted((e.name, e.status) for e in before.examples)
