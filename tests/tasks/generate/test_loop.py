"""generate_for_file on a copy of examples/py_inventory: real pytest, coverage and ruff in bwrap,
the real model client against the scripted Mistral server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, Settings, load_settings
from tasks.generate.context import build_context
from tasks.generate.loop import generate_for_file
from tasks.generate.skills import choose_skill
from tasks.generate.targets import Target
from tasks.model.client import ModelClient
from tasks.model.transport import Backoff
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

pytestmark = pytest.mark.slow

SOURCE = "src/inventory/reports.py"
SPEC = "tests/test_reports.py"
TARGET = Target(source=SOURCE, kind="python", spec=SPEC, reason="untested", coverage_before=0.0)

GOOD = """\
from inventory.reports import render_table, stock_value_cents, summary
from inventory.stock import Item, Stock


def make_stock() -> Stock:
    stock = Stock()
    stock.register(Item("A1", "Apple", 150, reorder_level=5), 10)
    stock.register(Item("B2", "Bolt", 20, reorder_level=50), 40)
    return stock


def test_stock_value_cents_sums_price_times_level():
    assert stock_value_cents(make_stock()) == 150 * 10 + 20 * 40


def test_summary_counts_and_formats():
    assert summary(make_stock()) == {
        "skus": 2,
        "units": 50,
        "value": "23.00 EUR",
        "reorder": ["B2"],
    }


def test_render_table_flags_reorder_lines():
    lines = render_table(make_stock()).splitlines()
    assert lines[0] == "SKU        NAME                   QTY"
    assert lines[1] == "A1         Apple                   10"
    assert lines[2] == "B2         Bolt                    40 !"


def test_render_table_of_empty_stock_is_the_header():
    assert render_table(Stock()) == "SKU        NAME                   QTY"
"""

# The missing-parenthesis problem: pytest cannot even collect the file.
NOT_LOADING = GOOD.replace("stock_value_cents(make_stock())", "stock_value_cents(make_stock()")
# Passes and covers, but half its tests assert nothing (forbidden: no-assertion).
VAGUE = GOOD.replace(
    'assert render_table(Stock()) == "SKU        NAME                   QTY"',
    "render_table(Stock())",
)
# Passes, lint-clean, precise, but never calls render_table: coverage misses its lines.
PARTIAL = GOOD.split("def test_render_table_flags")[0].rstrip() + "\n"


def files_reply(text: str, path: str = SPEC) -> str:
    return f"Here is the test file.\n\n{path}\n```python\n{text}```\n"


def judge_reply(score: float) -> str:
    return json.dumps({"score": score, "reasons": ["exact values"], "missing": []})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_example_repo("py_inventory", tmp_path / "repo")


def _settings(**gates: object) -> Settings:
    overrides = {"model.judge_samples": 1, "gates.flaky_runs": 1, "model.max_reasks": 1}
    overrides |= {f"gates.{k}": v for k, v in gates.items()}
    return load_settings(None, overrides)


def _run(  # type: ignore[no-untyped-def]
    project: Path,
    server: MistralServer,
    settings: Settings,
    iterations: int = 4,
    max_model_calls: int | None = None,
    time_limit_s: float | None = None,
):
    client = ModelClient.from_settings(settings, backoff=Backoff(initial_ms=10, max_ms=50))
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=project)
    chain = get_toolchain("python-pytest")
    try:
        return generate_for_file(
            project,
            TARGET,
            chain=chain,
            skill=choose_skill(TARGET.source, TARGET.kind),
            context=build_context(project, TARGET, chain),
            runner=runner,
            client=client,
            settings=settings,
            max_iterations=iterations,
            max_model_calls=max_model_calls,
            time_limit_s=time_limit_s,
        )
    finally:
        client.close()


def _generator_requests(server: MistralServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.schema_name is None]


def test_draft_that_does_not_load_is_fixed_with_the_load_error(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(
        Rule(name="fix", contains="# Task: fix the tests", replies=[files_reply(GOOD)])
    )
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(
        Rule(name="generate", contains="# Task: test", replies=[files_reply(NOT_LOADING)])
    )

    outcome = _run(project, mistral_server, _settings())

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.gate is None
    assert outcome.iterations == 2
    assert outcome.spec == SPEC
    assert outcome.files == {SPEC: GOOD}
    assert outcome.coverage_before == 0.0 and outcome.coverage_after == 1.0
    assert outcome.judge_score == 0.8 and outcome.static_score == 1.0
    generator = _generator_requests(mistral_server)
    assert [r.rule for r in generator] == ["generate", "fix"]
    fix_text = generator[1].text
    # The exact collection error (the whole prompt is shown when it is missing).
    assert "Load error" in fix_text and "SyntaxError" in fix_text, fix_text
    assert SOURCE in fix_text
    assert outcome.model_calls == 3  # generate, fix, one judge sample
    assert outcome.tokens > 0
    # The structured round records eval reads: the draft failed at load, the fix was clean.
    assert [(r.round, r.loaded, r.passed, r.gate) for r in outcome.rounds] == [
        (1, False, False, "load"),
        (2, True, True, None),
    ]
    assert [e.prompt_name for e in outcome.exchanges] == ["generate", "fix", "judge"]
    assert [len(e.replies) for e in outcome.exchanges] == [1, 1, 1]
    # The archived judge request is the one the judge model received.
    judge_request = next(r for r in mistral_server.requests if r.schema_name == "judge_verdict")
    assert [m["content"] for m in outcome.exchanges[2].messages] == [
        m["content"] for m in judge_request.messages
    ]
    assert len(outcome.reruns) == 1 and outcome.reruns[0].passed


def test_vague_test_is_rejected_at_the_static_gate_and_never_judged(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[judge_reply(1.0)]))
    mistral_server.add(Rule(name="gen", replies=[files_reply(VAGUE)]))

    outcome = _run(project, mistral_server, _settings(), iterations=2)

    assert outcome.verdict == "rejected"
    assert outcome.gate == "static"
    assert any("no-assertion" in r for r in outcome.reasons)
    assert outcome.judge_score is None
    assert all(r.schema_name is None for r in mistral_server.requests)
    # The second round was asked to replace the forbidden pattern.
    assert "no-assertion" in _generator_requests(mistral_server)[1].text


def test_passing_test_that_misses_coverage_is_rejected_with_uncovered_lines(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(name="gen", replies=[files_reply(PARTIAL)]))

    outcome = _run(project, mistral_server, _settings(min_coverage_gain=1.0), iterations=2)

    assert outcome.verdict == "rejected"
    assert outcome.gate == "coverage"
    assert outcome.coverage_after is not None and outcome.coverage_after < 0.9
    uncovered = next(r for r in outcome.reasons if r.startswith("uncovered lines:"))
    assert "25" in uncovered.split(":")[1].replace(" ", "").split(",")  # render_table's loop
    assert "uncovered lines" in _generator_requests(mistral_server)[1].text


def test_low_judge_score_rejects_with_what_is_missing(
    project: Path, mistral_server: MistralServer
) -> None:
    verdict = {"score": 0.4, "reasons": ["some vague"], "missing": ["negative prices"]}
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[json.dumps(verdict)]))
    mistral_server.add(Rule(replies=[files_reply(GOOD)]))

    # One round only: no round is left for the judge's feedback (test_quality_loops has them).
    outcome = _run(project, mistral_server, _settings(), iterations=1)

    assert outcome.verdict == "rejected" and outcome.gate == "judge"
    assert outcome.reasons[0] == "judge score 0.40 < 0.70"
    assert "missing: negative prices" in outcome.reasons
    assert outcome.iterations == 1


def test_paths_outside_the_skill_are_re_asked_and_model_errors_are_one_outcome(
    project: Path, mistral_server: MistralServer
) -> None:
    escape = files_reply("x = 1\n", "src/inventory/hack.py")
    mistral_server.add(Rule(replies=[escape]))

    outcome = _run(project, mistral_server, _settings())

    assert outcome.verdict == "error"
    assert "only files under tests/ may be written" in outcome.reasons[0]
    assert not (project / "src/inventory/hack.py").exists()
    # The re-ask carried the reason to the model.
    assert "only files under tests/" in mistral_server.requests[1].text
    assert outcome.exchanges[0].replies == [escape, escape]


def test_model_call_budget_stops_the_file_cleanly(
    project: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(replies=[files_reply(NOT_LOADING)]))

    outcome = _run(project, mistral_server, _settings(), max_model_calls=1)

    assert outcome.verdict == "error"
    assert outcome.reasons == [f"{SOURCE}: model call budget of 1 calls exhausted"]
    assert len(mistral_server.requests) == 1 and outcome.model_calls == 1
    assert outcome.iterations == 2  # the fix round was due, and not asked


def test_file_time_limit_stops_between_steps(project: Path, mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[files_reply(NOT_LOADING)]))

    # A limit far below one test run: the first round runs to its end, the fix is never asked.
    outcome = _run(project, mistral_server, _settings(), time_limit_s=0.001)

    assert outcome.verdict == "error"
    assert outcome.reasons == [f"{SOURCE}: time limit of 0.001 s reached"]
    assert len(mistral_server.requests) == 1 and outcome.iterations == 2


# Passes in a fresh process; a second run in the same process sees the list it left behind.
LEAKY = (
    GOOD
    + """

SEEN: list[int] = []


def test_render_table_is_rendered_once():
    SEEN.append(1)
    assert len(SEEN) == 1
"""
)


def test_a_test_that_fails_on_a_repeat_is_rejected_as_flaky(
    project: Path, mistral_server: MistralServer
) -> None:
    """The re-runs come from the round's one process (python repeats in one interpreter): the
    second run fails, the flaky gate says which re-run, and the judge is never asked."""
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[judge_reply(1.0)]))
    mistral_server.add(Rule(name="generate", contains="# Task: test", replies=[files_reply(LEAKY)]))

    outcome = _run(project, mistral_server, _settings(flaky_runs=2), iterations=1)

    assert outcome.verdict == "rejected" and outcome.gate == "flaky", outcome.reasons
    assert outcome.reasons[0].startswith("re-run 1 of")
    assert outcome.validation is not None and outcome.validation.passed
    assert [r.passed for r in outcome.reruns] == [False]
    assert not any(r.schema_name == "judge_verdict" for r in mistral_server.requests)
