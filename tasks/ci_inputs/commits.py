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
    how: Literal[
        "present", "fetched by id", "fetched with the remote's branches", "fetched by name"
    ]


class PushOutcome(BaseModel):
    """Whether the fix branch reached the remote (one line when not)."""

    model_config = ConfigDict(extra="forbid")

    branch: str
    remote: str
    pushed: bool
    error: str | None = None


def _has_commit(repo: Path, sha: str) -> str | None:
    done = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{sha}^{{commit}}"],
        cwd=repo,
        check=False,
    )
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


def _fetch(repo: Path, args: list[str], *, what: str, strict: bool = True) -> bool:
    """``git fetch --no-tags <args>`` (the remote's transports allowed); a failure is a
    GitError with git's last line when `strict`, else False."""
    done = run_git(
        ["fetch", "--no-tags", *args], cwd=repo, check=False, push=True, timeout=FETCH_TIMEOUT_S
    )
    if done.returncode != 0 and strict:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"{repo}: fetching {what} failed: {why[-1] if why else 'git failed'}")
    return done.returncode == 0


def ensure_ref(repo: Path, ref: str, *, remote: str = "origin") -> CommitFetch:
    """Make sure `ref` (a commit id, a branch, ``origin/<branch>`` or a full ``refs/...``
    name such as ``refs/pull/7/head``) names a commit in `repo`, fetching it from `remote`
    when the clone lacks it (a CI checkout often has only the head).

    Raises:
        GitError: a bad ref or remote, or `remote` does not have it (one line).
    """
    ref = ref.strip()
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref):
        raise GitError(f"{ref!r}: not a valid ref")
    if remote.startswith("-") or not remote:
        raise GitError(f"{remote!r}: not a valid remote")
    if full := _has_commit(repo, ref):
        return CommitFetch(sha=full, fetched=False, how="present")
    if _SHA.match(ref.lower()):
        return ensure_commit(repo, ref, remote=remote)
    if ref.startswith("refs/") and not ref.startswith(("refs/heads/", "refs/remotes/")):
        local = f"refs/autopilot/fetched/{ref.removeprefix('refs/')}"
        source = ref
    else:
        name = ref.removeprefix("refs/heads/").removeprefix("refs/remotes/")
        name = name.removeprefix(f"{remote}/")
        source, local = f"refs/heads/{name}", f"refs/remotes/{remote}/{name}"
    if run_git(["check-ref-format", local], cwd=repo, check=False).returncode:
        raise GitError(f"{ref!r}: not a valid ref")
    _fetch(repo, [remote, f"+{source}:{local}"], what=f"{source} from {remote}")
    if full := _has_commit(repo, local):
        log.info("fetched %s (%s) from %s", ref, full[:12], remote)
        return CommitFetch(sha=full, fetched=True, how="fetched by name")
    raise GitError(f"{repo}: {ref!r} is neither here nor on {remote}")


def merge_base(repo: Path, base: str, head: str, *, remote: str = "origin") -> str:
    """The commit where `head` left `base` (what a pull request's diff starts from); a shallow
    clone that lacks it is deepened from `remote` once.

    Raises:
        GitError: the two histories share no commit (one line).
    """
    args = ["merge-base", "--end-of-options", base, head]
    done = run_git(args, cwd=repo, check=False)
    if done.returncode != 0 and _shallow(repo):
        log.info("%s is a shallow clone: fetching the history for the merge base", repo)
        _unshallow(repo, remote)
        done = run_git(args, cwd=repo, check=False)
    if done.returncode != 0:
        raise GitError(
            f"{repo}: {base[:12]} and {head[:12]} share no history (no merge base); "
            "a shallow clone needs its history (fetch-depth: 0)"
        )
    return done.stdout.decode().strip()


def _shallow(repo: Path) -> bool:
    done = run_git(["rev-parse", "--is-shallow-repository"], cwd=repo, check=False)
    return done.stdout.decode().strip() == "true"


def _unshallow(repo: Path, remote: str) -> None:
    if not _fetch(repo, ["--unshallow", remote], what="the history", strict=False):
        log.warning("%s: could not deepen the clone from %s", repo, remote)


def push_fix_branch(repo: Path, branch: str, *, remote: str = "origin") -> PushOutcome:
    """Push `branch` to `remote` (never forced); a refusal is an outcome, not an exception:
    the branch stays in the clone either way."""
    try:
        push_branch(repo, branch, remote)
    except Exception as exc:  # GitError, BadInputError: reported, the branch is kept
        return PushOutcome(branch=branch, remote=remote, pushed=False, error=str(exc))
    return PushOutcome(branch=branch, remote=remote, pushed=True)
