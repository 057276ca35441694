"""Repair reproduces first: a failing group's test files are re-run on the base commit, in a
fresh worktree and the sandbox, before any model is asked.

A group none of whose failing examples fails again is ``flaky``: it is reported and handed to a
person with the evidence (the reported failure beside the passing re-run), and never patched.
A group with no test file to run (the suite cannot start) is not re-run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tasks.core.types import ValidationResult
from tasks.keep.git import worktree
from tasks.repair.review import same_case
from tasks.repair.state import FailureGroup, GroupState, Reproduction
from tasks.sandbox.make import make_runner

if TYPE_CHECKING:
    from tasks.repair.loop import RepairEnv

log = logging.getLogger(__name__)

#: Characters of the re-run's output kept as evidence.
MAX_EVIDENCE = 2_000


def rerun_at_base(env: RepairEnv, group: FailureGroup) -> ValidationResult:
    """The group's test files run once at the base commit (fresh worktree, sandbox, no
    coverage)."""
    with worktree(env.repo_root, env.base_commit) as wt:
        project = wt / env.sub if env.sub else wt
        runner = make_runner(env.settings.sandbox, root=wt)
        return env.chain.run_specs(
            project,
            group.spec_files,
            None,
            runner,
            timeout_s=env.settings.sandbox.spec_timeout_s,
            coverage=False,
        )


def judge_reproduction(group: FailureGroup, result: ValidationResult) -> Reproduction:
    """Whether the re-run shows the group's failure again. A run that does not load, or that
    does not run a failing example at all, counts as reproduced (nothing says it passes)."""
    if not result.loaded or result.reason:
        why = (result.load_error or result.reason or "did not run").strip()
        return Reproduction(reproduced=True, evidence=f"the re-run did not run: {why[:300]}")
    still: list[str] = []
    passed: list[str] = []
    for case in group.tests:
        seen = [e for e in result.examples if same_case(e, case)]
        if not seen or any(e.status in ("failed", "error") for e in seen):
            still.append(case.id)
        else:
            passed.append(case.id)
    message = (group.tests[0].message or "no message").strip().splitlines() or ["no message"]
    evidence = (
        f"reported failing: {', '.join(t.id for t in group.tests[:5])} ({message[0][:200]}); "
        f"re-run at the base commit: {len(passed)} passed, {len(still)} still fail"
    )
    return Reproduction(
        reproduced=bool(still), still_failing=still, passed=passed, evidence=evidence
    )


def reproduce(state: GroupState, env: RepairEnv) -> None:
    """Re-run `state`'s group at the base commit; a group that passes is classified flaky and
    handed to a person (step ``human``) with the evidence, before any model call."""
    if state.reproduction is not None or not state.group.spec_files:
        return
    result = rerun_at_base(env, state.group)
    state.reproduction = judge_reproduction(state.group, result)
    if state.reproduction.reproduced:
        log.info("group %s reproduced: %s", state.group.id, state.reproduction.evidence)
        return
    state.category = "flaky"
    why = f"flaky: passes on re-run, never patched; {state.reproduction.evidence}"
    log.info("group %s: %s", state.group.id, why)
    state.reasons.append(why)
    state.handoff_reasons.append(why)
    state.step = "human"
