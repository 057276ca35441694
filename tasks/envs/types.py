"""The typed outcome of preparing a project's environment: ready, or why not (one line)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.envs.needs import RunNeeds

Stack = Literal["ruby", "python"]
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


class PreparedEnv(BaseModel):
    """A built environment under ``$AUTOPILOT_HOME/envs/<name>``, reused read-only."""

    model_config = ConfigDict(extra="forbid")

    stack: Stack
    name: str = Field(description="Directory name: <stack>-<key>")
    key: str = Field(description="Digest of the lock files and the toolchain's version")
    path: str = Field(description="The environment's directory (absolute)")
    built: bool = Field(description="True when this call built it, False when it was reused")
    inputs: list[str] = Field(default_factory=list, description="Lock files that made the key")
    log: str = Field(description="The build log (the install commands and their output)")
    python: str | None = Field(
        None, description="The interpreter of a Python environment (the `python` setting)"
    )
    bundler: str | None = Field(None, description="Ruby: the Bundler version that built it")
    gem_path: list[str] = Field(
        default_factory=list, description="Ruby: the system gem directories also searched"
    )

    def needs(self, project: Path) -> RunNeeds:
        """What a sandboxed run of `project` (a worktree, or a project inside one) needs."""
        if self.stack == "python":
            # The sandbox adds an absolute interpreter's prefix and base on its own.
            return RunNeeds(dirs=(self.path,))
        home = str(Path(self.path) / "gems")
        return RunNeeds(
            dirs=(self.path,),
            env={
                "GEM_HOME": home,
                "GEM_PATH": ":".join([home, *self.gem_path]),
                "BUNDLE_GEMFILE": str(Path(project) / "Gemfile"),
                **({"BUNDLER_VERSION": self.bundler} if self.bundler else {}),
                # The lock is the truth: Bundler may neither re-resolve nor write it.
                "BUNDLE_FROZEN": "true",
                # A checked-in .bundle/config (BUNDLE_PATH: vendor/bundle) must not win.
                "BUNDLE_APP_CONFIG": str(Path(self.path) / "bundle-config"),
            },
        )


class EnvProblem(BaseModel):
    """An environment that could not be built: the file jobs are skipped with this reason."""

    model_config = ConfigDict(extra="forbid")

    stack: Stack
    name: str
    cause: Cause
    message: str = Field(description="One line: what failed and what to do")
    log: str | None = Field(None, description="The build log kept for a person")

    def one_line(self) -> str:
        """The reason a skipped file job shows."""
        return f"environment {self.name} not built ({self.cause}): {self.message}"


PrepareOutcome = PreparedEnv | EnvProblem | None
