"""What a stack gives the generic preparation: how its environment is keyed, built and used.

A toolchain that has environments to prepare answers ``Toolchain.env_builder()`` with an object
of this shape (the stacks' own modules implement it, in ``tasks/toolchains/<stack>/``);
:func:`tasks.envs.prepare.prepare_environment` does the rest (the key, the store, the lock,
the failure outcome, pruning) without knowing the stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tasks.envs.needs import RunNeeds
    from tasks.envs.settings import EnvSettings
    from tasks.envs.space import InstallSpace
    from tasks.envs.store import EnvRecord


class EnvBuilder(Protocol):
    """One stack's environment: its inputs, its toolchain's identity, its build, its use."""

    #: The environment's name prefix (``<stack>-<key>``): lowercase letters only.
    stack: str
    #: The installer a failed build names (``bundler``, ``pip``): the tool of the suite problem.
    tool: str

    def lock_inputs(self, project: Path) -> list[Path]:
        """The files the environment is built from; empty when there is nothing to build."""
        ...

    def toolchain_id(self) -> str:
        """The tool versions the key includes (raises ``BuildFailed`` when a tool is missing)."""
        ...

    def key_values(self, project: Path) -> dict[str, str]:
        """What else the key includes besides the lock files' digests (a version the build
        computes from git): name -> value."""
        ...

    def install_programs(self) -> list[str]:
        """Host programs the install runs that a command line does not start with (an
        interpreter named by an option): the sandbox shows their installations."""
        ...

    def build(
        self,
        space: InstallSpace,
        *,
        toolchain: str,
        inputs: dict[str, str],
        network: bool,
        timeout_s: float,
    ) -> EnvRecord:
        """Install into ``space.tmp`` (to live at ``space.final``; the install's commands
        see it at ``space.out``), every command through ``space.run``, in the sandbox;
        raises ``BuildFailed`` with one line."""
        ...

    def run_env(self, path: Path, record: EnvRecord) -> dict[str, str]:
        """Variables every sandboxed run gets (``{project}`` stands for the project)."""
        ...

    def interpreter(self, path: Path) -> str | None:
        """The interpreter the toolchain runs the tests with, when the environment has one."""
        ...

    def user_needs(self, project: Path, settings: EnvSettings) -> RunNeeds | None:
        """What the user's own environment (a setting naming one) needs, or None."""
        ...
