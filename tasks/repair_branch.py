"""Accepted repair patches -> one new branch, one commit per group; the user's tree untouched.

Patches are applied in order in a throwaway worktree at the base commit (a patch that no longer
applies on top of the earlier ones is reported, not forced). The commits are built with a
temporary index file and ``commit-tree``, like :func:`tasks.git.commit_files_to_new_branch`,
but chained, so each group's fix is its own commit; the branch ref is created last, and only if
it does not exist.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from git import GitCommandError
from gitdb.base import IStream

from tasks.git import (
    DEFAULT_AUTHOR,
    BranchExistsError,
    GitError,
    check_branch_name,
    open_repo,
    resolve_commit,
    unique_branch_name,
    worktree,
)
from tasks.repair import GroupState, RepairState
from tasks.repair_audit import git_apply
from tasks.repair_loop import RepairEnv, now
from tasks.repair_risk import parse_patch

log = logging.getLogger(__name__)


@dataclass
class GroupCommit:
    """One group's fix: the commit message and the files it changes (None: deleted)."""

    message: str
    files: dict[str, bytes | None]


def apply_in_order(
    repo_root: Path, sub: str, base_commit: str, patches: list[str]
) -> list[dict[str, bytes | None] | str | None]:
    """Apply `patches` one after the other on a worktree at `base_commit`.

    Returns:
        Per patch: the repository-relative files it changed with their new content (None when
        deleted); None when the earlier patches already made exactly this change (one cause
        that failed several groups); or a string saying why it did not apply on top of them.
    """
    out: list[dict[str, bytes | None] | str | None] = []
    with worktree(repo_root, base_commit) as wt:
        for patch in patches:
            problems = parse_patch(patch).problems
            if problems:  # never reached through the audit; a last line of defence
                out.append("refused: " + "; ".join(problems))
                continue
            error = git_apply(wt, sub, patch, check=True) or git_apply(wt, sub, patch, check=False)
            if error is not None and git_apply(wt, sub, patch, check=True, reverse=True) is None:
                out.append(None)
                continue
            if error is not None:
                out.append(f"does not apply on top of the earlier fixes: {error}")
                continue
            files: dict[str, bytes | None] = {}
            for path in parse_patch(patch).files:
                rel = f"{sub}/{path}" if sub else path
                target = wt / rel
                files[rel] = target.read_bytes() if target.is_file() else None
            out.append(files)
    return out


def commit_chain(
    repo: Path,
    base_commit: str,
    branch: str,
    commits: list[GroupCommit],
    author: tuple[str, str] = DEFAULT_AUTHOR,
) -> list[str]:
    """Create the NEW branch `branch` at `base_commit` + one commit per entry; return the shas.

    Nothing is checked out: HEAD, the index and the working tree of `repo` stay as they are.

    Raises:
        BranchExistsError: `branch` exists already (it is never overwritten).
        GitError: git failed.
    """
    r = open_repo(repo)
    parent = resolve_commit(repo, base_commit)
    check_branch_name(repo, branch)
    if r.git.for_each_ref(f"refs/heads/{branch}"):
        raise BranchExistsError(f"{repo}: branch {branch!r} already exists")
    name, email = author
    fd, index_file = tempfile.mkstemp(prefix="autopilot-index-")
    os.close(fd)
    os.unlink(index_file)
    env = {
        "GIT_INDEX_FILE": index_file,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    shas: list[str] = []
    try:
        r.git.read_tree(parent, env=env)
        for commit in commits:
            for path, data in sorted(commit.files.items()):
                if data is None:
                    r.git.update_index("--force-remove", "--", path, env=env)
                    continue
                stream = IStream("blob", len(data), BytesIO(data))
                blob = r.odb.store(stream).hexsha.decode()
                r.git.update_index("--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = r.git.write_tree(env=env)
            parent = str(r.git.commit_tree(tree, "-p", parent, "-m", commit.message, env=env))
            shas.append(parent)
        if shas:
            try:
                r.git.update_ref(
                    "-m", "autopilot: repair branch", f"refs/heads/{branch}", parent, ""
                )
            except GitCommandError as exc:
                raise BranchExistsError(f"{repo}: branch {branch!r}: {exc.stderr}") from None
    except GitCommandError as exc:
        raise GitError(f"{repo}: cannot commit to {branch!r}: {exc.stderr}".strip()) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index_file)
    log.info("branch %s: %d commit(s)", branch, len(shas))
    return shas


def commit_fixes(state: RepairState, env: RepairEnv) -> None:
    """Commit every accepted patch on one new branch, one commit per group, in group order."""
    accepted = [g for g in state.groups if g.final_patch and g.outcome is None]
    if not accepted:
        return
    applied = apply_in_order(
        env.repo_root, env.sub, env.base_commit, [g.final_patch or "" for g in accepted]
    )
    commits: list[GroupCommit] = []
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
        commits.append(GroupCommit(message=message, files=result))
        committed.append(g)
    if not commits:
        return
    branch = unique_branch_name(env.repo_root, f"autopilot/fix-{env.base_commit[:7]}")
    shas = commit_chain(env.repo_root, env.base_commit, branch, commits)
    state.branch = branch
    for g, sha in zip(committed, shas, strict=True):
        g.commit, g.outcome, g.finished_at = sha, "fixed", now()
    for g in duplicates:
        g.commit, g.outcome, g.finished_at = shas[-1], "fixed", now()
