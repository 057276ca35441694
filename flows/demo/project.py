"""The demo's own copy of the example: a fresh git repository under ``$AUTOPILOT_HOME/demo``,
so the branch the nightly makes never lands in the checkout the example ships in."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

from tasks.core.errors import BadInputError

#: Machine-made state of earlier runs, never copied.
_IGNORED = ("Gemfile.lock", "tmp", "log", "coverage", ".autopilot-tmp", "__pycache__")
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Autopilot demo",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "Autopilot demo",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
}


def _git(repo: Path, *args: str) -> None:
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **_IDENTITY}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise BadInputError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")


def demo_copy(example: Path, home: Path) -> Path:
    """A new repository holding `example` at one commit on ``main`` (a new directory per run)."""
    if not (example / "Gemfile").is_file():
        raise BadInputError(f"{example}: not the bundled Rails example (no Gemfile)")
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    dest = home / "demo" / f"{example.name}-{stamp}"
    shutil.copytree(example, dest, ignore=shutil.ignore_patterns(*_IGNORED))
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "The example as shipped")
    return dest
