"""Toolchains: how one stack runs its tests with coverage and lints them.

``get_toolchain("ruby-rspec")`` or ``get_toolchain("python-pytest")``; commands always go through
a :class:`~tasks.toolchains.base.CommandRunner` (the sandbox).
"""

from __future__ import annotations

from tasks.errors import ConfigError
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError
from tasks.types import ToolchainName

__all__ = ["CommandRunner", "SuiteResult", "Toolchain", "ToolchainError", "get_toolchain"]


def get_toolchain(name: ToolchainName | str, python: str | None = None) -> Toolchain:
    """The toolchain called `name`.

    Args:
        name: ``ruby-rspec`` or ``python-pytest``.
        python: the interpreter python-pytest runs the tests with (the ``python`` setting);
            None for Autopilot's own. Ignored by ruby-rspec.

    Raises:
        ConfigError: no toolchain has that name.
    """
    # Imported here so importing the package stays cheap for callers needing one toolchain.
    if name == "ruby-rspec":
        from tasks.toolchains.ruby import RubyRspecToolchain

        return RubyRspecToolchain()
    if name == "python-pytest":
        from tasks.toolchains.python import PythonPytestToolchain

        return PythonPytestToolchain(python)
    raise ConfigError(f"unknown toolchain {name!r} (expected ruby-rspec or python-pytest)")
