"""Toolchains: how one stack runs its tests with coverage and lints them.

``get_toolchain("ruby-rspec")`` or ``get_toolchain("python-pytest")``; commands always go through
a :class:`~tasks.toolchains.base.CommandRunner` (the sandbox).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.errors import ConfigError
from tasks.core.types import ToolchainName
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError

if TYPE_CHECKING:
    from tasks.core.config import Settings

__all__ = [
    "CommandRunner",
    "SuiteResult",
    "Toolchain",
    "ToolchainError",
    "get_toolchain",
    "toolchain_for",
]


def get_toolchain(
    name: ToolchainName | str,
    python: str | None = None,
    *,
    prepare: Sequence[str] = (),
    home: Path | None = None,
) -> Toolchain:
    """The toolchain called `name`.

    Args:
        name: ``ruby-rspec`` or ``python-pytest``.
        python: the interpreter python-pytest runs the tests with (the ``python`` setting);
            None for Autopilot's own, isolated. Ignored by ruby-rspec.
        prepare: commands to run once in a worktree before its tests (``prepare`` setting).
        home: ``AUTOPILOT_HOME`` (where python-pytest keeps its isolated environment).

    Raises:
        ConfigError: no toolchain has that name.
    """
    # Imported here so importing the package stays cheap for callers needing one toolchain.
    if name == "ruby-rspec":
        from tasks.toolchains.ruby.toolchain import RubyRspecToolchain

        return RubyRspecToolchain(prepare=tuple(prepare))
    if name == "python-pytest":
        from tasks.toolchains.python.toolchain import PythonPytestToolchain

        return PythonPytestToolchain(python, prepare=tuple(prepare), home=home)
    raise ConfigError(f"unknown toolchain {name!r} (expected ruby-rspec or python-pytest)")


def toolchain_for(settings: Settings, name: ToolchainName | str) -> Toolchain:
    """The toolchain `name` as the settings configure it (interpreter, prepare, home)."""
    return get_toolchain(name, settings.python, prepare=settings.prepare, home=settings.home)
