"""The one way Autopilot runs git on the host: hardened, and never trusting a tree the sandbox
could write to.

Every call gets:

- ``core.hooksPath=/dev/null`` (a repository's hooks are not ours to run), no fsmonitor, ``cat``
  as pager, no credential helper and, except for a push, only the ``file`` protocol (``ext::``
  and friends can run commands); diff-like commands get ``--no-ext-diff --no-textconv`` from
  their callers (:data:`NO_DIFF_PROGRAMS`);
- an environment without the caller's ``GIT_*`` variables (``GIT_DIR``, ``GIT_EXTERNAL_DIFF``,
  ``GIT_CONFIG_*``... set by a hook that started Autopilot would steer git elsewhere).

In a worktree Autopilot made (:func:`register_worktree`), where sandboxed code may have run, git
also reads no system or global configuration, is pointed at the repository by ``GIT_DIR`` and
``GIT_WORK_TREE`` (so no ``.git`` the sandbox planted in a subdirectory is ever discovered),
and runs only after checking that the worktree's ``.git`` link is still the file git wrote,
pointing where it pointed: a rewritten link could lead git to a configuration with a textconv,
fsmonitor or filter command of the sandbox's choosing.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import AutopilotError

#: Options for commands that may show a diff: never run a program configured for it.
NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")
_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "credential.helper=",
    "protocol.ext.allow=never",
)
#: Only local transports (worktrees, local clones) unless a push to the user's remote.
_LOCAL_ONLY = ("protocol.allow=never", "protocol.file.allow=always")
#: Variables of the caller kept for a push to the user's remote (ssh, certificates).
_PUSH_ENV = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "GIT_SSL_CAINFO")


class GitError(AutopilotError):
    """A git operation failed; the message is one line naming the repository or ref."""


class TamperedWorktreeError(GitError):
    """A worktree's ``.git`` link no longer points where Autopilot made it point."""


@dataclass(frozen=True)
class _Worktree:
    path: str
    gitdir: str
    link: str


_WORKTREES: dict[str, _Worktree] = {}
_LOCK = threading.Lock()


def _link_text(path: Path) -> str:
    return (path / ".git").read_text(encoding="utf-8", errors="replace")


def register_worktree(path: Path) -> None:
    """Remember the worktree at `path` just made by git: its ``.git`` link and git dir.

    Raises:
        GitError: `path` has no ``.git`` file pointing at a worktree git dir.
    """
    root = os.path.realpath(path)
    try:
        text = _link_text(Path(root))
    except OSError as exc:
        raise GitError(f"{root}: not a worktree: {exc.strerror or exc}") from None
    gitdir = text.strip().removeprefix("gitdir:").strip()
    if not text.startswith("gitdir:") or not os.path.isabs(gitdir):
        raise GitError(f"{root}: not a worktree: unexpected .git link")
    with _LOCK:
        _WORKTREES[root] = _Worktree(root, gitdir, text)


def unregister_worktree(path: Path) -> None:
    """Forget the worktree at `path` (it is being removed)."""
    with _LOCK:
        _WORKTREES.pop(os.path.realpath(path), None)


def _registered(cwd: Path) -> _Worktree | None:
    where = os.path.realpath(cwd)
    with _LOCK:
        items = list(_WORKTREES.values())
    for wt in items:
        if where == wt.path or where.startswith(wt.path + "/"):
            return wt
    return None


def check_worktree(wt: _Worktree) -> None:
    """Raise TamperedWorktreeError unless ``<wt>/.git`` is still the file git wrote."""
    link = Path(wt.path) / ".git"
    try:
        is_file = link.is_file() and not link.is_symlink()
        same = is_file and _link_text(Path(wt.path)) == wt.link
    except OSError:
        same = False
    if not same:
        raise TamperedWorktreeError(
            f"{wt.path}: the worktree's .git link was changed (by the code run in the sandbox?):"
            " refusing to run git there"
        )


def git_env(extra: Mapping[str, str] | None = None, *, isolated: bool, push: bool = False) -> dict:
    """The environment of a git command: the caller's without its ``GIT_*`` variables (a few
    transport ones kept for a push), plus `extra`; `isolated` drops system and global config."""
    keep = _PUSH_ENV if push else ()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in keep}
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
        }
    )
    if isolated:
        env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"})
        env["GIT_ATTR_NOSYSTEM"] = "1"
    env.update(extra or {})
    return env


def git_argv(args: Sequence[str], *, push: bool = False) -> list[str]:
    """``git`` with the hardening options before the subcommand `args`."""
    config = [*_CONFIG, *(() if push else _LOCAL_ONLY)]
    return ["git", *[part for c in config for part in ("-c", c)], *args]


def run_git(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 120.0,
    check: bool = True,
    push: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in `cwd`, hardened (see the module docstring).

    Args:
        args: the subcommand and its arguments.
        cwd: where git runs; inside a registered worktree the link is checked first.
        env: extra variables (``GIT_INDEX_FILE``, author and committer).
        input: bytes for git's stdin.
        timeout: seconds before git is killed (a GitError then).
        check: raise GitError on a non-zero exit (with git's most telling line).
        push: a push to the user's remote (its transports allowed, ssh variables kept).

    Raises:
        GitError: git could not run, timed out, or failed while `check`.
        TamperedWorktreeError: the worktree's ``.git`` link was changed.
    """
    extra = dict(env or {})
    wt = _registered(cwd)
    if wt is not None:
        check_worktree(wt)
        extra = {"GIT_DIR": wt.gitdir, "GIT_WORK_TREE": wt.path, **extra}
    try:
        done = subprocess.run(
            git_argv(args, push=push),
            cwd=str(cwd),
            env=git_env(extra, isolated=wt is not None, push=push),
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"{cwd}: git {args[0] if args else ''} failed: {exc}") from None
    if check and done.returncode != 0:
        raise GitError(f"{cwd}: git {args[0]}: {one_line(done.stderr or done.stdout)}")
    return done


def git_text(args: Sequence[str], *, cwd: Path, **kwargs: object) -> str:
    """The stdout of :func:`run_git` as text, without its final newline."""
    done = run_git(args, cwd=cwd, **kwargs)  # type: ignore[arg-type]
    return done.stdout.decode("utf-8", errors="replace").rstrip("\n")


def one_line(output: bytes | str) -> str:
    """git's most telling line: the first ``fatal:``/``error:`` line, else the first line."""
    text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        for prefix in ("fatal:", "error:"):
            if line.startswith(prefix):
                return line.removeprefix(prefix).strip()
    return lines[0] if lines else "git failed"
