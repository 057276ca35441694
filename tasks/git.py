"""Git helpers that never change the user's checkout.

Everything here works on the object database and refs only: worktrees live in temporary
directories outside the repository, and new commits are built with a temporary index file, so the
user's HEAD, branch, index and working tree stay byte-identical.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from io import BytesIO
from pathlib import Path

from git import GitCommandError, InvalidGitRepositoryError, NoSuchPathError, Repo
from gitdb.base import IStream

from tasks.errors import AutopilotError, BadInputError

log = logging.getLogger(__name__)

DEFAULT_AUTHOR = ("Test Autopilot", "autopilot@localhost")
# Hooks of the target repository are not ours to run (post-checkout on worktree add, etc.).
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


class GitError(AutopilotError):
    """A git operation failed; the message is one line naming the repository or ref."""


class BranchExistsError(GitError):
    """The branch to create exists already; it is never overwritten."""


def _one_line(exc: GitCommandError) -> str:
    """git's most telling line: the first `fatal:`/`error:` line, else the first line."""
    text = exc.stderr if isinstance(exc.stderr, str) and exc.stderr.strip() else str(exc)
    lines = [ln.strip().removeprefix("stderr:").strip().strip("'") for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for line in lines:
        for prefix in ("fatal:", "error:"):
            if line.startswith(prefix):
                return line.removeprefix(prefix).strip()
    return lines[0] if lines else "git failed"


def open_repo(repo: Path) -> Repo:
    """Open the repository at `repo` (a work tree root or a subdirectory of one).

    Raises:
        BadInputError: `repo` does not exist or is not inside a git repository.
    """
    try:
        return Repo(repo, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise BadInputError(f"{repo}: not a git repository") from None


def resolve_commit(repo: Path, ref: str = "HEAD") -> str:
    """The full commit sha that `ref` names in `repo`.

    Raises:
        BadInputError: not a git repository, or `ref` does not name a commit.
    """
    r = open_repo(repo)
    if not ref or ref.startswith("-"):
        raise BadInputError(f"{repo}: bad ref {ref!r}")
    try:
        return str(r.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"))
    except GitCommandError:
        raise BadInputError(f"{repo}: {ref!r} is not a commit") from None


@contextlib.contextmanager
def worktree(repo: Path, commit: str, parent: Path | None = None) -> Iterator[Path]:
    """A detached worktree of `repo` at `commit` in a temporary directory, removed at exit.

    The directory is outside the repository (under `parent` or the system temp dir). It is
    removed, and `git worktree prune` run, even when the body raises.

    Raises:
        BadInputError: not a repository or not a commit.
        GitError: git could not create the worktree.
    """
    r = open_repo(repo)
    sha = resolve_commit(repo, commit)
    base = Path(tempfile.mkdtemp(prefix="autopilot-wt-", dir=parent))
    path = base / "worktree"
    try:
        try:
            r.git.execute(["git", *_NO_HOOKS, "worktree", "add", "--detach", str(path), sha])
        except GitCommandError as exc:
            raise GitError(
                f"{repo}: cannot create worktree at {sha[:12]}: {_one_line(exc)}"
            ) from None
        yield path
    finally:
        with contextlib.suppress(GitCommandError):
            r.git.worktree("remove", "--force", str(path))
        shutil.rmtree(base, ignore_errors=True)
        with contextlib.suppress(GitCommandError):
            r.git.worktree("prune")


def _branch_exists(r: Repo, name: str) -> bool:
    refs = r.git.for_each_ref("--format=%(refname)", f"refs/heads/{name}", "refs/remotes/")
    remote_suffix = f"/{name}"
    return any(
        ref == f"refs/heads/{name}"
        or (ref.startswith("refs/remotes/") and ref.endswith(remote_suffix))
        for ref in refs.splitlines()
    )


def check_branch_name(repo: Path, branch: str) -> str:
    """Return `branch` if git accepts it as a branch name, else raise BadInputError."""
    r = open_repo(repo)
    try:
        r.git.check_ref_format("--branch", branch)
    except GitCommandError:
        raise BadInputError(f"{branch!r}: not a valid branch name") from None
    if branch.startswith("-"):
        raise BadInputError(f"{branch!r}: not a valid branch name")
    return branch


def unique_branch_name(repo: Path, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first name no local or remote branch uses."""
    r = open_repo(repo)
    check_branch_name(repo, base)
    candidate, n = base, 1
    while _branch_exists(r, candidate):
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
    r = open_repo(repo)
    base = resolve_commit(repo, base_commit)
    check_branch_name(repo, branch)
    paths = {_check_path(p): data for p, data in files.items()}
    if r.git.for_each_ref(f"refs/heads/{branch}"):
        raise BranchExistsError(f"{repo}: branch {branch!r} already exists")
    name, email = author
    fd, index_file = tempfile.mkstemp(prefix="autopilot-index-")
    os.close(fd)
    os.unlink(index_file)  # git wants to create it itself
    env = {
        "GIT_INDEX_FILE": index_file,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    try:
        r.git.read_tree(base, env=env)
        for path, data in sorted(paths.items()):
            blob = r.odb.store(IStream("blob", len(data), BytesIO(data))).hexsha.decode()
            r.git.update_index("--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = r.git.write_tree(env=env)
        sha = str(r.git.commit_tree(tree, "-p", base, "-m", message, env=env))
        try:
            # The empty old value makes update-ref refuse when the branch appeared meanwhile.
            r.git.update_ref("-m", "autopilot: create branch", f"refs/heads/{branch}", sha, "")
        except GitCommandError as exc:
            raise BranchExistsError(f"{repo}: branch {branch!r}: {_one_line(exc)}") from None
    except GitCommandError as exc:
        raise GitError(f"{repo}: cannot commit to {branch!r}: {_one_line(exc)}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index_file)
    log.info("created branch %s at %s with %d file(s)", branch, sha[:12], len(paths))
    return sha


def apply_patch_check(worktree: Path, diff: str) -> str | None:
    """Check that `diff` applies cleanly in `worktree` (nothing is written).

    Returns:
        None when it applies, otherwise git's error text (one or more lines).
    """
    r = open_repo(worktree)
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False, encoding="utf-8") as fh:
        fh.write(diff if diff.endswith("\n") else diff + "\n")
        patch = fh.name
    try:
        r.git.execute(["git", "apply", "--check", "--verbose", patch], with_extended_output=False)
    except GitCommandError as exc:
        text = exc.stderr if isinstance(exc.stderr, str) else str(exc)
        return text.strip().removeprefix("stderr:").strip().strip("'").strip() or "git apply failed"
    finally:
        os.unlink(patch)
    return None


def push_branch(repo: Path, branch: str, remote: str = "origin") -> None:
    """Push `branch` to `remote` under the same name, never forcing.

    Raises:
        GitError: the push was rejected or the remote is unreachable.
    """
    r = open_repo(repo)
    check_branch_name(repo, branch)
    if remote.startswith("-"):
        raise BadInputError(f"{remote!r}: not a valid remote")
    try:
        r.git.execute(
            [
                "git",
                *_NO_HOOKS,
                "push",
                "--porcelain",
                remote,
                f"refs/heads/{branch}:refs/heads/{branch}",
            ]
        )
    except GitCommandError as exc:
        # --porcelain reports a rejected ref on stdout as "!<TAB>src:dst<TAB>[rejected] (why)".
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        rejected = [ln.split("\t")[-1] for ln in out.splitlines() if ln.startswith("!")]
        reason = rejected[0] if rejected else _one_line(exc)
        raise GitError(f"{repo}: push of {branch!r} to {remote!r} failed: {reason}") from None


def subdir_in_repo(path: Path) -> tuple[Path, str]:
    """The work tree root holding `path`, and `path` relative to it ("" at the root).

    A project can live in a subdirectory of a larger repository (a monorepo, or the bundled
    examples); worktrees are made of the whole repository and the project found inside.
    """
    r = open_repo(path)
    root = Path(str(r.working_tree_dir)).resolve()
    rel = path.resolve().relative_to(root).as_posix()
    return root, "" if rel == "." else rel
