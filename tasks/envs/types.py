"""The typed outcome of preparing a project's environment: ready, or why not (one line)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.envs.needs import RunNeeds

#: Why an environment could not be built, one word each; the message says the rest.
Cause = Literal[
    "missing_native_library",
    "unknown_package",
    "no_registry_access",
    "lock_unresolvable",
    "toolchain_mismatch",
    "tool_missing",
    "timeout",
    "build_failed",
]
#: Stands for the project directory in :attr:`PreparedEnv.run_env`'s values.
PROJECT = "{project}"


class PreparedEnv(BaseModel):
    """A built environment under ``$AUTOPILOT_HOME/envs/<name>``, reused read-only."""

    model_config = ConfigDict(extra="forbid")

    stack: str = Field(pattern=r"^[a-z]+$", description="The stack's name prefix")
    name: str = Field(description="Directory name: <stack>-<key>")
    key: str = Field(description="Digest of the lock files and the toolchain's version")
    path: str = Field(description="The environment's directory (absolute)")
    built: bool = Field(description="True when this call built it, False when it was reused")
    inputs: list[str] = Field(default_factory=list, description="Lock files that made the key")
    log: str = Field(description="The build log (the install commands and their output)")
    interpreter: str | None = Field(
        None, description="The interpreter the tests run with, when the environment has one"
    )
    run_env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables every sandboxed run gets ({project} stands for the project)",
    )
    extra: dict[str, list[str]] = Field(
        default_factory=dict, description="What the stack recorded about the build"
    )

    def needs(self, project: Path) -> RunNeeds:
        """What a sandboxed run of `project` (a worktree, or a project inside one) needs."""
        where = str(Path(project))
        env = {k: v.replace(PROJECT, where) for k, v in self.run_env.items()}
        return RunNeeds(dirs=(self.path,), env=env)


class EnvProblem(BaseModel):
    """An environment that could not be built: the file jobs are skipped with this reason."""

    model_config = ConfigDict(extra="forbid")

    stack: str
    name: str
    cause: Cause
    message: str = Field(description="One line: what failed and what to do")
    log: str | None = Field(None, description="The build log kept for a person")

    def one_line(self) -> str:
        """The reason a skipped file job shows."""
        return f"environment {self.name} not built ({self.cause}): {self.message}"


PrepareOutcome = PreparedEnv | EnvProblem | None
