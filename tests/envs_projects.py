"""Test helper: the projects of tests/data/envs copied to a temporary directory, with their
locally built gems in ``vendor/cache`` (no gem registry is reachable here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "envs"


def build_gem(name: str, dest: Path) -> Path:
    """``gem build`` the test gem `name` into `dest`; returns the .gem file."""
    dest.mkdir(parents=True, exist_ok=True)
    source = DATA / "gems" / name
    out = dest / f"{name}-0.1.0.gem"
    subprocess.run(
        ["gem", "build", "--silent", f"{name}.gemspec", "-o", str(out)],
        cwd=source,
        check=True,
        capture_output=True,
    )
    return out


def ruby_money(tmp: Path, *, extra_gems: tuple[str, ...] = ()) -> Path:
    """The ruby_money project with money_fmt (and `extra_gems`) in its vendor/cache."""
    project = tmp / "ruby_money"
    shutil.copytree(DATA / "ruby_money", project)
    for gem in ("money_fmt", *extra_gems):
        build_gem(gem, project / "vendor" / "cache")
    return project


def py_words(tmp: Path) -> Path:
    """The py_words project (needs `inflection` from the package index)."""
    project = tmp / "py_words"
    shutil.copytree(DATA / "py_words", project)
    return project


NODE_DATA = Path(__file__).resolve().parent / "data" / "node"


def node_project(name: str, dest: Path) -> Path:
    """The Node project `name` of tests/data/node (``ts_shape``, ``esm_js``, ``cjs_js``) as a
    committed git repository at `dest`, without node_modules (as a clean clone has none)."""
    from tests.examples_repo import git

    shutil.copytree(NODE_DATA / name, dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", f"project {name}")
    return dest.resolve()
