"""Test helper: throwaway git repositories made from the example projects.

Every test that needs a real repository calls :func:`make_example_repo`; nothing ever runs in
``examples/`` itself, so runs cannot leave files in the checkout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from tasks.core.types import CommandResult

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Never copied: machine-generated state of earlier runs.
_IGNORED = (
    "Gemfile.lock",
    "tmp",
    "log",
    "coverage",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".autopilot-tmp",
    ".coverage",
    "coverage.json",
)
_GIT_ID = {
    "GIT_AUTHOR_NAME": "Autopilot Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "Autopilot Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
}
# Gemfile digest -> lock text: `bundle lock --local` depends only on the Gemfile and the
# installed gems, so one resolution per test session is enough.
_LOCKS: dict[str, str] = {}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; returns stdout, raises on failure."""
    env = {**os.environ, **_GIT_ID}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _bundle_lock(repo: Path) -> None:
    gemfile = (repo / "Gemfile").read_bytes()
    key = hashlib.sha256(gemfile).hexdigest()
    if key not in _LOCKS:
        subprocess.run(
            ["bundle", "lock", "--local"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "BUNDLE_GEMFILE": str(repo / "Gemfile")},
        )
        _LOCKS[key] = (repo / "Gemfile.lock").read_text(encoding="utf-8")
    else:
        (repo / "Gemfile.lock").write_text(_LOCKS[key], encoding="utf-8")


def make_example_repo(name: str, dest: Path) -> Path:
    """Copy ``examples/<name>`` to `dest`, prepare it to run offline, and commit it.

    Args:
        name: ``rails_shop`` or ``py_inventory``.
        dest: the new repository's directory (created; must not exist or be empty).

    Returns:
        `dest`, resolved: a git repository on branch ``main`` with one commit holding the
        example (plus ``Gemfile.lock`` from ``bundle lock --local`` for Ruby examples) and a
        clean ``git status``.
    """
    source = EXAMPLES / name
    if not source.is_dir():
        raise ValueError(f"no example named {name!r} in {EXAMPLES}")
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty")
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*_IGNORED), dirs_exist_ok=True)
    if (dest / "Gemfile").is_file():
        _bundle_lock(dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "user.name", _GIT_ID["GIT_AUTHOR_NAME"])
    git(dest, "config", "user.email", _GIT_ID["GIT_AUTHOR_EMAIL"])
    git(dest, "add", "-A")
    if (dest / "Gemfile.lock").is_file():
        # The example ignores its lock file (it is machine-made); the repository commits it.
        git(dest, "add", "-f", "Gemfile.lock")
    git(dest, "commit", "-q", "-m", f"example {name}")
    return dest


class SubprocessRunner:
    """A plain-subprocess CommandRunner for tests: no isolation, a timeout, full output."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> CommandResult:
        """Run `argv` in `cwd` with `env` added to this process's environment."""
        start = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            return CommandResult(
                argv=argv,
                exit_code=-9,
                stdout=str(exc.stdout or ""),
                stderr=str(exc.stderr or ""),
                duration_s=time.monotonic() - start,
                timed_out=True,
                reason=f"timeout after {timeout_s}s",
            )
        return CommandResult(
            argv=argv,
            exit_code=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            duration_s=time.monotonic() - start,
        )
