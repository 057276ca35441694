"""The fix branch's whole proof (issue 15): before the branch is made, the tree holding every
accepted fix runs the fixed groups' affected tests and their neighbours (the union of what each
audit re-ran) together, twice, in the sandbox, without coverage.

Each audit proved its patch alone; this proves them together. An example that fails together
and is not a known failure of a group left out of the branch takes the group it belongs to
off the branch (``needs_human``, with the reason); a failure that belongs to no fixed group
(a neighbour) takes them all off. The caller rebuilds the branch from what is left.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.types import TestCaseResult, ValidationResult
from tasks.keep.git import DEFAULT_AUTHOR, worktree
from tasks.keep.git_safe import git_text
from tasks.repair.review import same_case
from tasks.repair.state import GroupState
from tasks.sandbox.make import make_runner

if TYPE_CHECKING:
    from tasks.repair.loop import RepairEnv

log = logging.getLogger(__name__)

#: Runs of the affected tests together (the issue: at least twice).
TOGETHER_RUNS = 2


def together_specs(groups: list[GroupState]) -> list[str]:
    """What the groups' audits re-ran, in order, without repeats."""
    specs: dict[str, None] = {}
    for g in groups:
        for attempt in reversed(g.attempts):
            if attempt.patch == g.final_patch and attempt.audit is not None:
                specs.update(dict.fromkeys(attempt.audit.rerun_specs))
                break
        specs.update(dict.fromkeys(g.group.spec_files))
    return list(specs)


def _failures(result: ValidationResult, known: list[TestCaseResult]) -> list[TestCaseResult]:
    failing = [e for e in result.examples if e.status in ("failed", "error")]
    return [e for e in failing if not any(same_case(e, k) for k in known)]


def prove_fix_branch(env: RepairEnv, tree: str, groups: list[GroupState]) -> dict[str, str]:
    """Run the fixed groups' tests together on `tree` (the base commit plus every fix).

    Returns:
        group id -> why it leaves the branch ({}: proved together).
    """
    specs = together_specs(groups)
    if len(groups) < 2 or not specs:
        return {}  # one fix: its audit already ran these tests together, flaky_runs times
    ours = {id(t) for g in groups for t in g.group.tests}
    known = [t for t in env.all_failures if id(t) not in ours]
    top = git_text(["rev-parse", "--show-toplevel"], cwd=env.repo_root)
    message = ["-m", "autopilot: fix branch proof (not a branch)"]
    name, email = DEFAULT_AUTHOR
    who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
    who |= {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
    argv = ["commit-tree", tree, "-p", env.base_commit, *message]
    commit = git_text(argv, cwd=Path(top), env=who)
    with worktree(env.repo_root, commit) as wt:
        project = wt / env.sub if env.sub else wt
        runner = make_runner(env.settings.sandbox, root=wt)
        for number in range(1, TOGETHER_RUNS + 1):
            order = specs if number % 2 else list(reversed(specs))
            result = env.chain.run_specs(
                project,
                order,
                None,
                runner,
                timeout_s=env.settings.sandbox.spec_timeout_s,
                coverage=False,
            )
            bad = _failures(result, known)
            if bad or not result.loaded or result.reason:
                return _blame(groups, result, bad, number)
    return {}


def _blame(
    groups: list[GroupState], result: ValidationResult, bad: list[TestCaseResult], number: int
) -> dict[str, str]:
    """The groups a failed together-run takes off the branch, with the reason."""
    if not result.loaded or result.reason:
        why = (result.load_error or result.reason or "did not run").strip().splitlines()[0]
        names = f"the tests did not run: {why[:200]}"
    else:
        names = ", ".join(e.id for e in bad[:5])
    reason = (
        f"its fix passed alone, but the fix branch's tests fail together "
        f"(run {number} of {TOGETHER_RUNS}): {names}"
    )
    owners = {
        g.group.id for g in groups for e in bad if any(same_case(e, t) for t in g.group.tests)
    }
    blamed = owners if owners and result.loaded and not result.reason else None
    out = {g.group.id: reason for g in groups if blamed is None or g.group.id in blamed}
    log.warning("fix branch proof: %s", reason)
    return out
