"""The failing commit in the worker's clone, and the fix branch out to the remote.

Both go through the hardened git helper (:mod:`tasks.keep.git_safe`): no hooks, no credential
helper of the repository's, the caller's ``GIT_*`` variables dropped. Talking to the user's
remote uses the same allowance as a push (its transports, its ssh variables).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tasks.keep.git import push_branch
from tasks.keep.git_safe import GitError, run_git

log = logging.getLogger(__name__)

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
FETCH_TIMEOUT_S = 600.0


class CommitFetch(BaseModel):
    """The failing commit, and how it came to be in the clone."""

    model_config = ConfigDict(extra="forbid")

    sha: str
    fetched: bool
    how: Literal["present", "fetched by id", "fetched with the remote's branches"]


class PushOutcome(BaseModel):
    """Whether the fix branch reached the remote (one line when not)."""

    model_config = ConfigDict(extra="forbid")

    branch: str
    remote: str
    pushed: bool
    error: str | None = None


def _has_commit(repo: Path, sha: str) -> str | None:
    done = run_git(["rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}"], cwd=repo, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def ensure_commit(repo: Path, sha: str, *, remote: str = "origin") -> CommitFetch:
    """Make sure commit `sha` is in `repo`, fetching it from `remote` when missing.

    First by its id (servers that allow it, such as GitHub's, send just that commit), then,
    for servers that refuse unadvertised ids, the remote's branches.

    Raises:
        GitError: not a commit id, an invalid remote name, or the remote does not have it
            (one line).
    """
    sha = sha.strip().lower()
    if not _SHA.match(sha):
        raise GitError(f"{sha!r}: not a commit id (7 to 64 hexadecimal digits)")
    if remote.startswith("-") or not remote:
        raise GitError(f"{remote!r}: not a valid remote")
    if full := _has_commit(repo, sha):
        return CommitFetch(sha=full, fetched=False, how="present")
    if len(sha) == 40 or len(sha) == 64:
        done = run_git(
            ["fetch", "--no-tags", "--no-write-fetch-head", remote, sha],
            cwd=repo,
            check=False,
            push=True,
            timeout=FETCH_TIMEOUT_S,
        )
        if done.returncode == 0 and (full := _has_commit(repo, sha)):
            log.info("fetched %s from %s by id", full, remote)
            return CommitFetch(sha=full, fetched=True, how="fetched by id")
    done = run_git(
        ["fetch", "--no-tags", remote, f"+refs/heads/*:refs/remotes/{remote}/*"],
        cwd=repo,
        check=False,
        push=True,
        timeout=FETCH_TIMEOUT_S,
    )
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"{repo}: fetching {remote} failed: {why[-1] if why else 'git failed'}")
    if full := _has_commit(repo, sha):
        log.info("fetched %s with the branches of %s", full, remote)
        return CommitFetch(sha=full, fetched=True, how="fetched with the remote's branches")
    raise GitError(f"{repo}: commit {sha} is neither here nor on any branch of {remote}")


def push_fix_branch(repo: Path, branch: str, *, remote: str = "origin") -> PushOutcome:
    """Push `branch` to `remote` (never forced); a refusal is an outcome, not an exception:
    the branch stays in the clone either way."""
    try:
        push_branch(repo, branch, remote)
    except Exception as exc:  # GitError, BadInputError: reported, the branch is kept
        return PushOutcome(branch=branch, remote=remote, pushed=False, error=str(exc))
    return PushOutcome(branch=branch, remote=remote, pushed=True)
