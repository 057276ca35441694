"""Repair reproduces first (issue 15): a reported failure that passes on re-run at the base commit
is classified flaky and handed to a person with the evidence, never sent to a model or patched;
and a patch whose re-run passes once but not `flaky_runs` times is not accepted.

End to end on a copy of the Python example: real reports, real pytest in the sandbox, the
scripted model server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.types import TestCaseResult, ValidationResult
from tasks.repair.reproduce import judge_reproduction
from tasks.repair.state import FailureGroup
from tests.examples_repo import git
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import (
    PRICING,
    archived,
    branch_file,
    is_surgeon,
    patch_to,
    regressed_repo,
    run_flow,
    script,
)

#: Passes on its first run in a tree, then fails: a patch that only looks like a fix.
FLAKY_PATCH = (
    "```diff\n"
    f"--- a/{PRICING}\n+++ b/{PRICING}\n"
    "@@ -7,3 +7,5 @@\n"
    " # (minimum quantity, percent off), highest threshold first.\n"
    "-VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, 6))\n"
    '+_RUNS = __import__("pathlib").Path(__file__).with_name("runs.txt")\n'
    "+VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, 6 if _RUNS.exists() else 5))\n"
    "+_RUNS.touch()\n"
    " DEFAULT_TAX_PERCENT = 20\n"
    "```\n"
)


@pytest.mark.slow
def test_a_failure_that_passes_on_rerun_is_flaky_handed_over_and_never_patched(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    # The code at the base commit passes: the reported failure does not reproduce.
    source = repo / PRICING
    source.write_text(source.read_text().replace("(10, 6))", "(10, 5))"))
    git(repo, "commit", "-qam", "Revert the discount change")
    script(mistral_server, [patch_to(5)])

    result = run_flow(repo, report, tmp_path, human_timeout=0)

    [group] = result["groups"]
    assert (group["outcome"], group["attempts"], group["patch"]) == ("needs_human", 0, None)
    flaky = [r for r in group["reasons"] if r.startswith("flaky: passes on re-run")]
    assert flaky and "1 passed, 0 still fail" in flaky[0] and "assert 6 == 5" in flaky[0]
    assert mistral_server.requests == []  # no model asked
    assert result["branch"] is None
    found = archived(tmp_path, result["run_id"])
    final = sorted(k for k in found["keys"] if k.startswith("state-") and "final" in k)[-1]
    [state] = json.loads((found["dir"] / final).read_text())["groups"]
    assert state["category"] == "flaky"
    assert state["reproduction"]["reproduced"] is False
    assert state["reproduction"]["passed"] == group["tests"]


@pytest.mark.slow
def test_a_patch_that_passes_once_but_not_flaky_runs_times_is_revised(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "2")
    repo, report, _ = regressed_repo(tmp_path)
    script(mistral_server, [FLAKY_PATCH, patch_to(5)])

    result = run_flow(repo, report, tmp_path)

    [group] = result["groups"]
    assert (group["outcome"], group["attempts"]) == ("fixed", 2)
    assert "(10, 5))" in branch_file(repo, result["branch"], PRICING)
    assert any(
        "Flaky after the patch: passed once, then failed on re-run 1 of 2" in r
        for r in group["reasons"]
    )
    second = [r for r in mistral_server.requests if r.schema_name == "diagnosis" or is_surgeon(r)]
    assert any("Flaky after the patch" in r.text for r in second[1:])


def _case(status: str, message: str = "assert 6 == 5") -> TestCaseResult:
    return TestCaseResult(
        id="t/test_p.py::test_x",
        name="test_x",
        file="t/test_p.py",
        status=status,
        message=message,  # type: ignore[arg-type]
    )


def _group() -> FailureGroup:
    return FailureGroup(
        id="g-1",
        signature="s",
        error_type="AssertionError",
        message_shape="m",
        frame="",
        tests=[_case("failed")],
    )


@pytest.mark.parametrize(
    ("result", "reproduced"),
    [
        (
            ValidationResult(toolchain="python-pytest", loaded=True, examples=[_case("passed")]),
            False,
        ),
        (
            ValidationResult(toolchain="python-pytest", loaded=True, examples=[_case("failed")]),
            True,
        ),
        # A run that did not run the example, or did not load, never says "flaky".
        (ValidationResult(toolchain="python-pytest", loaded=True, examples=[]), True),
        (ValidationResult(toolchain="python-pytest", loaded=False, load_error="boom"), True),
        (
            ValidationResult(
                toolchain="python-pytest", loaded=True, reason="timeout", examples=[_case("passed")]
            ),
            True,
        ),
    ],
)
def test_only_a_clean_pass_of_every_failing_example_is_flaky(
    result: ValidationResult, reproduced: bool
) -> None:
    assert judge_reproduction(_group(), result).reproduced is reproduced
