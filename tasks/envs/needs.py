"""What one test run needs from outside the worktree: read-only directories and variables.

A prepared environment (:mod:`tasks.envs`) and the run's services (:mod:`tasks.services`) each
say what a sandbox must show (exact directories, bound read-only by the sandbox as toolchain
directories) and which environment variables to set. :class:`RunNeeds` carries both;
:func:`runner_with` puts the variables on every command of an existing runner, so the
toolchains need no change: the directories go to ``make_runner(toolchain_dirs=needs.dirs)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from tasks.core.types import CommandResult


class RunNeeds(BaseModel):
    """Directories a sandbox must show read-only, and variables every command gets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dirs: tuple[str, ...] = Field(default=(), description="Absolute host directories, read-only")
    env: dict[str, str] = Field(default_factory=dict, description="Variables for every command")

    def merged(self, *others: RunNeeds) -> RunNeeds:
        """These needs and `others`'; a later variable of the same name wins."""
        dirs = dict.fromkeys(self.dirs)
        env = dict(self.env)
        for other in others:
            dirs.update(dict.fromkeys(other.dirs))
            env.update(other.env)
        return RunNeeds(dirs=tuple(dirs), env=env)


class RunnerLike(Protocol):
    """What runs one command (a sandbox runner; the toolchains' ``CommandRunner``)."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> CommandResult: ...


class NeedsRunner:
    """A command runner that adds fixed variables to every command of another runner.

    The caller's own variables win over the fixed ones (a toolchain's ``RUBYOPT`` or
    ``RAILS_ENV`` stays the toolchain's).
    """

    def __init__(self, inner: RunnerLike, env: Mapping[str, str]) -> None:
        self.inner = inner
        self.env = dict(env)

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> CommandResult:
        """Run `argv` through the inner runner with the fixed variables under `env`."""
        merged = {**self.env, **(env or {})}
        return self.inner.run(argv, cwd=cwd, env=merged, timeout_s=timeout_s, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # The inner runner's other attributes (root, limits, backend...) stay reachable.
        return getattr(self.inner, name)


def runner_with(runner: RunnerLike, needs: RunNeeds) -> NeedsRunner:
    """`runner` with `needs.env` on every command (its directories must already be shown)."""
    return NeedsRunner(runner, needs.env)
