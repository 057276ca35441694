"""The node-jest tools for an installed Autopilot: the shipped package.json and lock installed
under AUTOPILOT_HOME by the real npm, once per lock, and found there by the toolchain."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.toolchains.base import ToolchainError
from tasks.toolchains.node import install, tools
from tasks.toolchains.node.toolchain import NodeJestToolchain


def test_the_home_install_is_the_default_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(tools.TOOLS_ENV, raising=False)
    monkeypatch.setattr(tools, "checkout_tools_dir", lambda: tmp_path / "no-checkout")
    assert tools.default_tools_dir(tmp_path / "home") == tmp_path / "home/toolchains/node"
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "env-home"))
    assert tools.default_tools_dir() == tmp_path / "env-home/toolchains/node"
    chain = NodeJestToolchain(home=tmp_path / "home")
    with pytest.raises(ToolchainError, match=r"python -m tasks\.toolchains\.node\.install"):
        chain.tools(tmp_path)


def test_a_failing_npm_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"npm ci in .* failed"):
        install.install_tools(tmp_path / "tools", npm="/bin/false")
    assert (tmp_path / "tools" / "package-lock.json").is_file()


@pytest.mark.slow
def test_install_under_the_home_then_run_from_it(tmp_path: Path) -> None:
    assert install.main([str(tmp_path / "home")]) == 0
    target = tmp_path / "home" / "toolchains" / "node"
    found = tools.resolve_tools(tmp_path, home=target)
    assert Path(found.jest).is_file() and found.home == target.resolve()
    assert install.install_tools(target) is False  # the same lock: nothing to do
