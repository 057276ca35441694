"""Accepted repair patches -> one new branch, one commit per group; the user's tree untouched.

Patches are applied in order with ``git apply --cached`` to a scratch index holding the base
commit (nothing is checked out; a patch that no longer applies on top of the earlier ones is
reported, not forced), so each commit holds exactly what git makes of the patch: modes, renames
and deletions included. Each step is checked against the tree the auditor saw
(:func:`tasks.repair.patch.same_change`): a commit never records other paths than those audited.
The commits are chained with ``commit-tree``; the branch ref is created last, and only if it does
not exist.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tasks.keep.git import (
    NewCommit,
    commit_chain,
    open_repo,
    scratch_index,
    unique_branch_name,
)
from tasks.keep.git_safe import git_text, one_line, run_git
from tasks.repair.branch_proof import prove_fix_branch
from tasks.repair.loop import RepairEnv, now
from tasks.repair.patch import apply_args, describe, patch_bytes, same_change
from tasks.repair.risk import parse_patch
from tasks.repair.state import GroupState, RepairState

log = logging.getLogger(__name__)


@dataclass
class Applied:
    """One patch applied on top of the earlier ones: the tree before and after it."""

    parent_tree: str
    tree: str


def _top(repo: Path) -> Path:
    return Path(str(open_repo(repo).working_tree_dir))


def apply_in_order(
    repo_root: Path,
    sub: str,
    base_commit: str,
    patches: list[str],
    audited: list[str | None] | None = None,
) -> list[Applied | str | None]:
    """Apply `patches` one after the other on the tree of `base_commit` (a scratch index).

    Args:
        audited: per patch, the tree its audit saw (:attr:`PatchReview.tree`), or None when no
            audit stands for it (a person's edited patch); a step that changes other paths, or
            other content, than its audit saw is refused.

    Returns:
        Per patch: the trees before and after it; None when the earlier patches already made
        exactly this change (one cause that failed several groups); or why it was not applied.
    """
    top = _top(repo_root)
    base_tree = git_text(["rev-parse", "--verify", f"{base_commit}^{{tree}}"], cwd=top)
    out: list[Applied | str | None] = []
    expected = audited if audited is not None else [None] * len(patches)
    with scratch_index(top, base_tree) as env:
        tree = base_tree
        for patch, audited_tree in zip(patches, expected, strict=True):
            why, new_tree = _step(top, sub, env, tree, patch)
            if why is None and new_tree is not None and audited_tree is not None:
                why = same_change(top, tree, new_tree, base_tree, audited_tree)
                why = f"not the audited change: {why}" if why else None
            if why is not None or new_tree is None:
                run_git(["read-tree", tree], cwd=top, env=env)  # undo a refused step
                out.append(why)
                continue
            out.append(Applied(parent_tree=tree, tree=new_tree))
            tree = new_tree
    return out


def _step(
    top: Path, sub: str, env: dict[str, str], tree: str, patch: str
) -> tuple[str | None, str | None]:
    """(why not, None), (None, None) for a change already made, or (None, the new tree)."""
    problems = parse_patch(patch).problems
    if problems:  # never reached through the audit; a last line of defence
        return "refused: " + "; ".join(problems), None
    data = patch_bytes(patch)
    done = run_git(apply_args(sub, cached=True), cwd=top, env=env, input=data, check=False)
    if done.returncode != 0:
        back = apply_args(sub, cached=True, reverse=True, check=True)
        if run_git(back, cwd=top, env=env, input=data, check=False).returncode == 0:
            return None, None
        return f"does not apply on top of the earlier fixes: {one_line(done.stderr)}", None
    new_tree = git_text(["write-tree"], cwd=top, env=env)
    problems = describe(top, sub, tree, new_tree)[1].problems
    if problems:
        return "refused: " + "; ".join(problems), None
    return None, new_tree


def _audited_tree(g: GroupState) -> str | None:
    """The tree the audit saw for the group's final patch (None for a person's own patch)."""
    for attempt in reversed(g.attempts):
        if attempt.patch == g.final_patch and attempt.audit is not None:
            return attempt.audit.tree
    return None


def commit_fixes(state: RepairState, env: RepairEnv) -> None:
    """Commit every accepted patch on one new branch, one commit per group, in group order."""
    accepted = [g for g in state.groups if g.final_patch and g.outcome is None]
    if not accepted:
        return
    applied = apply_in_order(
        env.repo_root,
        env.sub,
        env.base_commit,
        [g.final_patch or "" for g in accepted],
        [_audited_tree(g) for g in accepted],
    )
    commits: list[NewCommit] = []
    committed: list[GroupState] = []
    duplicates: list[GroupState] = []
    for g, result in zip(accepted, applied, strict=True):
        if result is None:
            duplicates.append(g)
            g.reasons.append("its patch is already part of an earlier fix on the branch")
            continue
        if isinstance(result, str):
            g.outcome = "needs_human"
            g.reasons.append(result)
            continue
        cause = g.diagnosis.root_cause if g.diagnosis else g.group.signature
        tests = "\n".join(f"- {t.id}" for t in g.group.tests)
        message = f"autopilot: fix {g.group.id}: {cause[:60]}\n\n{cause}\n\nTests:\n{tests}\n"
        commits.append(NewCommit(message=message, tree=result.tree))
        committed.append(g)
    if not commits:
        return
    dropped = prove_fix_branch(env, commits[-1].tree, committed)
    if dropped:
        for g in committed:
            if g.group.id in dropped:
                g.outcome = "needs_human"
                g.reasons.append(dropped[g.group.id])
        commit_fixes(state, env)  # the branch again, from the fixes that are left
        return
    branch = unique_branch_name(env.repo_root, f"autopilot/fix-{env.base_commit[:7]}")
    shas = commit_chain(env.repo_root, env.base_commit, branch, commits)
    state.branch = branch
    for g, sha in zip(committed, shas, strict=True):
        g.commit, g.outcome, g.finished_at = sha, "fixed", now()
    for g in duplicates:
        g.commit, g.outcome, g.finished_at = shas[-1], "fixed", now()
