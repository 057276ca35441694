"""Eval's "before" column (issue 15 item 8): the LLM judge is asked about the existing spec, run
in the sandbox first, exactly as after; a file with no spec scores 0 without a call; a spec that
does not pass scores 0 without a call; the judge's tokens are counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.eval_before import judge_before
from tasks.core.config import load_settings
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule, ok
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import judge_reply

UNITS, UNITS_SPEC = "src/inventory/units.py", "tests/test_units.py"
PRICING, PRICING_SPEC = "src/inventory/pricing.py", "tests/test_pricing.py"
REPORTS = "src/inventory/reports.py"


def _archive(tmp_path: Path, targets: list[Target]) -> str:
    archive = tmp_path / "archive"
    archive.mkdir()
    doc = [t.model_dump(mode="json") for t in targets]
    (archive / "targets.json").write_text(json.dumps(doc), encoding="utf-8")
    return str(archive)


def _outcome(source: str, spec: str) -> FileOutcome:
    return FileOutcome(source=source, kind="python", spec=spec, verdict="accepted")


def test_the_judge_scores_the_existing_spec_and_no_spec_scores_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mistral_server: MistralServer
) -> None:
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    # pricing's spec fails (a broken assertion, committed): scored 0, never sent to the judge.
    broken = (repo / PRICING_SPEC).read_text() + "\n\ndef test_broken():\n    assert 1 == 2\n"
    (repo / PRICING_SPEC).write_text(broken)
    git(repo, "commit", "-qam", "a failing pricing test")
    mistral_server.add(
        Rule(schema_name="judge_verdict", replies=[ok(judge_reply(0.6), prompt_tokens=40)])
    )
    targets = [
        Target(
            source=UNITS, kind="python", specs=[UNITS_SPEC], spec=UNITS_SPEC, reason="weak-static"
        ),
        Target(source=REPORTS, kind="python", spec="tests/test_reports.py", reason="untested"),
        Target(
            source=PRICING, kind="python", specs=[PRICING_SPEC], spec=PRICING_SPEC, reason="failing"
        ),
    ]
    outcomes = [
        _outcome(UNITS, UNITS_SPEC),
        _outcome(REPORTS, "tests/test_reports.py"),
        _outcome(PRICING, PRICING_SPEC),
    ]

    before, tokens = judge_before(repo, _archive(tmp_path, targets), outcomes, load_settings(repo))

    # One judge call, about the existing spec of units.py, carrying that spec's text.
    [request] = mistral_server.requests
    assert request.schema_name == "judge_verdict"
    assert (repo / UNITS_SPEC).read_text().strip().splitlines()[-1] in request.text
    assert UNITS in request.text
    units = before[UNITS]
    assert units.spec == UNITS_SPEC and units.static is not None and units.static > 0
    # The combined score, as `autopilot judge` gives it: under the static one, over 0.
    assert 0 < units.judge <= 1
    assert before[REPORTS].model_dump() == {"spec": None, "judge": 0.0, "static": 0.0}
    assert (before[PRICING].judge, before[PRICING].static) == (0.0, 0.0)
    assert tokens > 0
    # No archive or no target: nothing judged, nothing spent.
    assert judge_before(repo, None, outcomes, load_settings(repo)) == ({}, 0)
