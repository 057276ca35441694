"""Git helpers that never change the user's checkout.

Everything here works on the object database and refs only: worktrees live in temporary
directories outside the repository, and new commits are built with a temporary index file, so the
user's HEAD, branch, index and working tree stay byte-identical. Every git command runs through
:func:`tasks.keep.git_safe.run_git` (hardened; in a worktree, only after its ``.git`` link is
checked).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from git import InvalidGitRepositoryError, NoSuchPathError, Repo
from gitdb.base import IStream

from tasks.core.errors import BadInputError
from tasks.keep.git_safe import (
    GitError,
    TamperedWorktreeError,
    git_text,
    one_line,
    register_worktree,
    run_git,
    unregister_worktree,
)

__all__ = [
    "DEFAULT_AUTHOR",
    "BranchExistsError",
    "GitError",
    "NewCommit",
    "TamperedWorktreeError",
    "check_branch_name",
    "commit_chain",
    "commit_files_to_new_branch",
    "open_repo",
    "push_branch",
    "resolve_commit",
    "subdir_in_repo",
    "unique_branch_name",
    "worktree",
]

log = logging.getLogger(__name__)

DEFAULT_AUTHOR = ("Test Autopilot", "autopilot@localhost")


class BranchExistsError(GitError):
    """The branch to create exists already; it is never overwritten."""


def open_repo(repo: Path) -> Repo:
    """Open the repository at `repo` (a work tree root or a subdirectory of one).

    Raises:
        BadInputError: `repo` does not exist or is not inside a git repository.
    """
    try:
        return Repo(repo, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise BadInputError(f"{repo}: not a git repository") from None


def _top(repo: Path) -> Path:
    """The work tree root (or git dir of a bare repository) holding `repo`."""
    r = open_repo(repo)
    return Path(str(r.working_tree_dir or r.git_dir))


def resolve_commit(repo: Path, ref: str = "HEAD") -> str:
    """The full commit sha that `ref` names in `repo`.

    Raises:
        BadInputError: not a git repository, or `ref` does not name a commit.
    """
    top = _top(repo)
    if not ref or ref.startswith("-"):
        raise BadInputError(f"{repo}: bad ref {ref!r}")
    try:
        return git_text(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd=top
        )
    except GitError:
        raise BadInputError(f"{repo}: {ref!r} is not a commit") from None


@contextlib.contextmanager
def worktree(repo: Path, commit: str, parent: Path | None = None) -> Iterator[Path]:
    """A detached worktree of `repo` at `commit` in a temporary directory, removed at exit.

    The directory is outside the repository (under `parent` or the system temp dir). It is
    registered with :mod:`tasks.keep.git_safe`, so every later git command in it checks that its
    ``.git`` link is still the one git wrote. It is removed, and `git worktree prune` run, even
    when the body raises.

    Raises:
        BadInputError: not a repository or not a commit.
        GitError: git could not create the worktree.
    """
    top = _top(repo)
    sha = resolve_commit(repo, commit)
    base = Path(tempfile.mkdtemp(prefix="autopilot-wt-", dir=parent))
    path = base / "worktree"
    try:
        done = run_git(["worktree", "add", "--detach", str(path), sha], cwd=top, check=False)
        if done.returncode != 0:
            raise GitError(f"{repo}: cannot create worktree at {sha[:12]}: {one_line(done.stderr)}")
        register_worktree(path)
        yield path
    finally:
        unregister_worktree(path)
        run_git(["worktree", "remove", "--force", str(path)], cwd=top, check=False)
        shutil.rmtree(base, ignore_errors=True)
        run_git(["worktree", "prune"], cwd=top, check=False)


def _branch_exists(top: Path, name: str) -> bool:
    refs = git_text(
        ["for-each-ref", "--format=%(refname)", f"refs/heads/{name}", "refs/remotes/"], cwd=top
    )
    remote_suffix = f"/{name}"
    return any(
        ref == f"refs/heads/{name}"
        or (ref.startswith("refs/remotes/") and ref.endswith(remote_suffix))
        for ref in refs.splitlines()
    )


def local_branch_exists(repo: Path, branch: str) -> bool:
    """Whether `refs/heads/<branch>` exists in `repo`."""
    return bool(git_text(["for-each-ref", f"refs/heads/{branch}"], cwd=_top(repo)))


def check_branch_name(repo: Path, branch: str) -> str:
    """Return `branch` if git accepts it as a branch name, else raise BadInputError."""
    top = _top(repo)
    if (
        branch.startswith("-")
        or run_git(["check-ref-format", "--branch", branch], cwd=top, check=False).returncode
    ):
        raise BadInputError(f"{branch!r}: not a valid branch name")
    return branch


def unique_branch_name(repo: Path, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first name no local or remote branch uses."""
    top = _top(repo)
    check_branch_name(repo, base)
    candidate, n = base, 1
    while _branch_exists(top, candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _check_path(path: str) -> str:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)
    ):
        raise BadInputError(f"{path!r}: not a safe repository-relative path")
    return path


def _identity(author: tuple[str, str]) -> dict[str, str]:
    name, email = author
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


@contextlib.contextmanager
def scratch_index(
    repo: Path, tree_ish: str, author: tuple[str, str] = DEFAULT_AUTHOR
) -> Iterator[dict[str, str]]:
    """A temporary index file holding `tree_ish`, removed at exit.

    Yields the environment for :func:`run_git` (``GIT_INDEX_FILE``, author and committer), so
    commands like ``apply --cached``, ``update-index`` and ``write-tree`` work on it and never
    on the user's index.
    """
    fd, index_file = tempfile.mkstemp(prefix="autopilot-index-")
    os.close(fd)
    os.unlink(index_file)  # git wants to create it itself
    env = {"GIT_INDEX_FILE": index_file, **_identity(author)}
    try:
        run_git(["read-tree", tree_ish], cwd=_top(repo), env=env)
        yield env
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index_file)


def create_branch(repo: Path, branch: str, sha: str, reason: str) -> None:
    """Point the NEW branch `branch` at `sha`; refused (BranchExistsError) when it exists."""
    # The empty old value makes update-ref refuse when the branch appeared meanwhile.
    done = run_git(
        ["update-ref", "-m", reason, f"refs/heads/{branch}", sha, ""], cwd=_top(repo), check=False
    )
    if done.returncode != 0:
        raise BranchExistsError(f"{repo}: branch {branch!r}: {one_line(done.stderr)}")


@dataclass(frozen=True)
class NewCommit:
    """One commit to make: its message and the tree it records."""

    message: str
    tree: str


def commit_chain(
    repo: Path,
    base_commit: str,
    branch: str,
    commits: list[NewCommit],
    author: tuple[str, str] = DEFAULT_AUTHOR,
) -> list[str]:
    """Create the NEW branch `branch` at `base_commit` + one commit per entry; return the shas.

    The one way Autopilot commits: trees chained with ``commit-tree`` and the branch ref made
    last, with ``update-ref`` refusing a branch that appeared meanwhile. Nothing is checked out:
    HEAD, the index and the working tree of `repo` stay as they are.

    Raises:
        BadInputError: bad repository, commit or branch name.
        BranchExistsError: `branch` exists already (it is never overwritten).
        GitError: git failed.
    """
    top = _top(repo)
    parent = resolve_commit(repo, base_commit)
    check_branch_name(repo, branch)
    if local_branch_exists(repo, branch):
        raise BranchExistsError(f"{repo}: branch {branch!r} already exists")
    env = _identity(author)
    shas: list[str] = []
    for commit in commits:
        argv = ["commit-tree", commit.tree, "-p", parent, "-m", commit.message]
        parent = git_text(argv, cwd=top, env=env)
        shas.append(parent)
    if shas:
        create_branch(repo, branch, parent, "autopilot: create branch")
    log.info("branch %s: %d commit(s)", branch, len(shas))
    return shas


def tree_with_files(
    repo: Path, base_commit: str, files: Mapping[str, bytes], author: tuple[str, str]
) -> str:
    """The tree of `base_commit` with `files` written as regular (100644) blobs, built in a
    temporary index (the user's index is untouched).

    Raises:
        BadInputError: a file path that is not a safe repository-relative path.
    """
    r = open_repo(repo)
    top = _top(repo)
    paths = {_check_path(p): data for p, data in files.items()}
    with scratch_index(repo, base_commit, author) as env:
        for path, data in sorted(paths.items()):
            blob = r.odb.store(IStream("blob", len(data), BytesIO(data))).hexsha.decode()
            run_git(
                ["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"],
                cwd=top,
                env=env,
            )
        return git_text(["write-tree"], cwd=top, env=env)


def commit_files_to_new_branch(
    repo: Path,
    base_commit: str,
    branch: str,
    files: Mapping[str, bytes],
    message: str,
    author: tuple[str, str] = DEFAULT_AUTHOR,
) -> str:
    """Commit `files` on top of `base_commit` as the NEW branch `branch`; return the commit sha.

    Nothing is checked out: the tree is built in a temporary index file, so the user's HEAD,
    index and working tree are untouched. Files are written as regular (100644) blobs.

    Raises:
        BadInputError: bad repository, commit, branch name or file path.
        BranchExistsError: `branch` exists already (it is never overwritten).
        GitError: git failed.
    """
    base = resolve_commit(repo, base_commit)
    check_branch_name(repo, branch)
    if local_branch_exists(repo, branch):
        raise BranchExistsError(f"{repo}: branch {branch!r} already exists")
    try:
        tree = tree_with_files(repo, base, files, author)
        [sha] = commit_chain(repo, base, branch, [NewCommit(message, tree)], author)
    except BranchExistsError:
        raise
    except GitError as exc:
        raise GitError(f"{repo}: cannot commit to {branch!r}: {exc}") from None
    log.info("created branch %s at %s with %d file(s)", branch, sha[:12], len(files))
    return sha


def push_branch(repo: Path, branch: str, remote: str = "origin") -> None:
    """Push `branch` to `remote` under the same name, never forcing.

    Raises:
        GitError: the push was rejected or the remote is unreachable.
    """
    top = _top(repo)
    check_branch_name(repo, branch)
    if remote.startswith("-"):
        raise BadInputError(f"{remote!r}: not a valid remote")
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    done = run_git(
        ["push", "--porcelain", remote, refspec], cwd=top, check=False, push=True, timeout=600
    )
    if done.returncode != 0:
        # --porcelain reports a rejected ref on stdout as "!<TAB>src:dst<TAB>[rejected] (why)".
        out = done.stdout.decode("utf-8", errors="replace")
        rejected = [ln.split("\t")[-1] for ln in out.splitlines() if ln.startswith("!")]
        reason = rejected[0] if rejected else one_line(done.stderr)
        raise GitError(f"{repo}: push of {branch!r} to {remote!r} failed: {reason}")


def subdir_in_repo(path: Path) -> tuple[Path, str]:
    """The work tree root holding `path`, and `path` relative to it ("" at the root).

    A project can live in a subdirectory of a larger repository (a monorepo, or the bundled
    examples); worktrees are made of the whole repository and the project found inside.
    """
    r = open_repo(path)
    root = Path(str(r.working_tree_dir)).resolve()
    rel = path.resolve().relative_to(root).as_posix()
    return root, "" if rel == "." else rel
