"""The repair loop and the auditor without Prefect: real worktrees, pytest in the sandbox, and
the scripted model server (path traversal, wrong diagnosis, the validation cache, tool failure).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.facts.reports.read import parse_reports
from tasks.keep.git import worktree
from tasks.model.client import ModelClient
from tasks.repair.loop import RepairEnv, run_group
from tasks.repair.review import review_patch
from tasks.repair.scout import group_failures
from tasks.repair.state import GroupState
from tasks.toolchains.registry import toolchain_for
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import (
    diagnosis_json,
    is_surgeon,
    patch_to,
    regressed_repo,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path, mistral_server: MistralServer) -> Iterator[tuple[RepairEnv, GroupState]]:
    """A regressed example, its one failure group, and a RepairEnv on the scripted server."""
    repo, report, head = regressed_repo(tmp_path)
    settings = load_settings(repo, {"repair.max_retries": 1})
    cases = parse_reports([report], repo=repo).cases
    failing = [c for c in cases if c.status in ("failed", "error")]
    chain = toolchain_for(settings, "python-pytest")
    [group] = group_failures(failing, chain.file_rules(repo))
    client = ModelClient.from_settings(settings)
    with worktree(repo, head) as wt:
        yield (
            RepairEnv(
                client=client,
                settings=settings,
                repo_root=repo,
                sub="",
                base_commit=head,
                chain=chain,
                project=wt,
                all_failures=failing,
            ),
            GroupState(group=group),
        )
    client.close()


def _steps() -> tuple[list[str], object]:
    seen: list[str] = []

    def save(state: GroupState, step: str) -> None:
        json.dumps(state.model_dump(mode="json"))  # every step's state must be archivable
        seen.append(step)

    return seen, save


TRAVERSAL = "```diff\n--- /dev/null\n+++ b/../../evil.txt\n@@ -0,0 +1 @@\n+owned\n```\n"


def test_a_path_traversal_diff_is_refused_and_never_applied(
    env: tuple[RepairEnv, GroupState], mistral_server: MistralServer, tmp_path: Path
) -> None:
    repair_env, state = env
    mistral_server.add(Rule(schema_name="diagnosis", replies=[diagnosis_json()]))
    mistral_server.add(Rule(when=is_surgeon, replies=[TRAVERSAL]))
    seen, save = _steps()

    run_group(state, repair_env, save)  # type: ignore[arg-type]

    assert state.step == "human"
    assert len(state.attempts) == 2  # the first refusal, then one revision (max_retries=1)
    audit = state.attempts[0].audit
    assert audit is not None and audit.verdict == "NEEDS_REVISION"
    assert audit.static_errors == ["'../../evil.txt': '..' leaves the repository"]
    assert audit.rerun_specs == []  # refused before any worktree or sandbox
    assert state.handoff_reasons == ["retries exhausted: 2 patches audited, none passed"]
    assert not list(tmp_path.rglob("evil.txt"))
    assert not (repair_env.repo_root.parent.parent / "evil.txt").exists()
    # The revision request told the surgeon why its patch was refused.
    revision = [r for r in mistral_server.requests if is_surgeon(r)][1]
    assert "Patch refused" in revision.text
    assert seen == ["context", "diagnose", "surgeon", "audit", "surgeon", "audit"]


def test_a_patch_that_changes_nothing_sends_the_group_back_to_the_diagnostician(
    env: tuple[RepairEnv, GroupState], mistral_server: MistralServer
) -> None:
    repair_env, state = env
    comment_only = (
        "```diff\n--- a/src/inventory/pricing.py\n+++ b/src/inventory/pricing.py\n"
        "@@ -7,2 +7,2 @@\n-# (minimum quantity, percent off), highest threshold first.\n"
        "+# (minimum quantity, percent off), largest threshold first.\n"
        " VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, 6))\n```\n"
    )
    mistral_server.add(Rule(schema_name="diagnosis", replies=[diagnosis_json()]))
    mistral_server.add(Rule(when=is_surgeon, replies=[comment_only, patch_to(5)]))
    seen, save = _steps()

    run_group(state, repair_env, save)  # type: ignore[arg-type]

    assert state.step == "done" and state.final_patch is not None
    assert "(10, 5))" in state.final_patch
    assert seen == [
        "context",
        *("diagnose", "surgeon", "audit"),
        *("diagnose", "surgeon", "audit"),
    ]
    first_audit = state.attempts[0].audit
    assert first_audit is not None and first_audit.diagnosis_wrong
    diagnoses = [r for r in mistral_server.requests if r.schema_name == "diagnosis"]
    assert "previous diagnosis was rejected" in diagnoses[1].text
    assert "alternative hypothesis was: The test expectation is outdated" in diagnoses[1].text
    assert "largest threshold first" in diagnoses[1].text  # the patch that did nothing
    # The surgeon under the new diagnosis still learns which patch did not work.
    surgeons: list[RecordedRequest] = [r for r in mistral_server.requests if is_surgeon(r)]
    assert "largest threshold first" in surgeons[1].text
    assert "diagnosis looks wrong" in surgeons[1].text


def test_an_identical_diff_reuses_its_earlier_validation(
    env: tuple[RepairEnv, GroupState],
) -> None:
    repair_env, state = env
    patch = patch_to(5).removeprefix("```diff\n").removesuffix("```\n")
    kwargs = {
        "repo_root": repair_env.repo_root,
        "sub": "",
        "base_commit": repair_env.base_commit,
        "chain": repair_env.chain,
        "group": state.group,
        "diagnosis": None,
        "known_failures": [],
        "settings": repair_env.settings,
    }
    first = review_patch(patch=patch, **kwargs)  # type: ignore[arg-type]
    second = review_patch(patch=patch, **kwargs)  # type: ignore[arg-type]
    other = review_patch(
        patch=patch_to(7).removeprefix("```diff\n").removesuffix("```\n"), **kwargs
    )  # type: ignore[arg-type]
    assert (first.verdict, first.cached) == ("PASSED", False)
    assert (second.verdict, second.cached) == ("PASSED", True)
    assert second.rerun_output == first.rerun_output
    assert (other.verdict, other.cached) == ("NEEDS_REVISION", False)
    assert first.rerun_specs == ["tests/test_pricing.py"]


def test_a_failing_model_hands_the_group_to_a_person(
    env: tuple[RepairEnv, GroupState], mistral_server: MistralServer
) -> None:
    repair_env, state = env  # no rule: the server answers 500 to everything
    repair_env.client.max_retries = 0
    seen, save = _steps()

    run_group(state, repair_env, save)  # type: ignore[arg-type]

    assert state.step == "human"
    assert state.handoff_reasons[0].startswith("a tool failed: ModelError:")
    assert seen == ["context", "tool-failed"]


def test_a_rerun_on_the_same_failures_asks_no_model_and_runs_no_tests(
    env: tuple[RepairEnv, GroupState], mistral_server: MistralServer
) -> None:
    repair_env, state = env
    mistral_server.add(Rule(schema_name="diagnosis", replies=[diagnosis_json()]))
    mistral_server.add(Rule(when=is_surgeon, replies=[patch_to(5)]))
    fresh = state.model_copy(deep=True)
    _, save = _steps()

    first = run_group(state, repair_env, save)  # type: ignore[arg-type]
    asked = len(mistral_server.requests)
    second = run_group(fresh, repair_env, save)  # type: ignore[arg-type]

    assert asked == 2  # one diagnosis, one patch
    assert len(mistral_server.requests) == asked  # the re-run was answered from the caches
    assert first.step == second.step == "done"
    assert first.final_patch == second.final_patch
    assert second.attempts[0].audit is not None and second.attempts[0].audit.cached
    assert second.tokens == 0
