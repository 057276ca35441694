"""Test helpers for the node-jest toolchain: sandboxed runners and throwaway projects."""

from __future__ import annotations

from pathlib import Path

from tasks.core.config import SandboxSettings
from tasks.sandbox.base import Runner
from tasks.sandbox.make import make_runner
from tasks.toolchains.node.tools import NodeTools, resolve_tools
from tests.examples_repo import git

TSCONFIG = (
    '{"compilerOptions": {"target": "es2020", "module": "commonjs", "strict": true,'
    ' "esModuleInterop": true, "skipLibCheck": true}}\n'
)


def tools_for(repo: Path) -> NodeTools:
    """The toolchain's tools for `repo` (Autopilot's own install from `make setup`)."""
    return resolve_tools(repo)


def bwrap_runner(repo: Path, tools: NodeTools, timeout_s: float = 180) -> Runner:
    """The real bwrap sandbox over `repo`, showing the node toolchain read-only."""
    settings = SandboxSettings(backend="bwrap", timeout_s=timeout_s)
    return make_runner(
        settings, repo, toolchain_dirs=tools.sandbox_dirs(), cache_dir=repo.parent / "cache"
    )


def write_project(repo: Path, files: dict[str, str], *, tsconfig: bool = True) -> Path:
    """A committed git repository holding `files` (and a strict tsconfig.json)."""
    repo.mkdir(parents=True, exist_ok=True)
    if tsconfig:
        files = {"tsconfig.json": TSCONFIG, **files}
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo.resolve()
