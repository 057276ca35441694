"""Which node_modules a node-jest run uses and how the run's tree reaches it: the precedence
(setting, the tree's own, the prepared environment, the checkout's, Autopilot's tools), the link
into the tree, what the sandbox is shown, and the Node options a project's scripts give Jest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.toolchains.node.jest import compiler_overrides, node_flags
from tasks.toolchains.node.lint import eslint_argv
from tasks.toolchains.node.modules import choose_modules
from tasks.toolchains.node.toolchain import NodeJestToolchain
from tasks.toolchains.node.tools import resolve_tools


def _modules(where: Path, *packages: str) -> Path:
    for name in packages:
        (where / name).mkdir(parents=True)
        (where / name / "package.json").write_text(f'{{"name": "{name}"}}')
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A checkout with its own node_modules, a worktree of it without, and an environment."""
    checkout = tmp_path / "checkout"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    return {
        "checkout": checkout,
        "checkout_modules": _modules(checkout / "node_modules", "@types/jest"),
        "worktree": worktree,
        "env": _modules(tmp_path / "envs" / "node-0123456789abcdef" / "node_modules", "jest"),
        "setting": _modules(tmp_path / "mine" / "node_modules", "ts-jest"),
    }


def test_a_worktree_gets_the_checkouts_node_modules_linked(places: dict[str, Path]) -> None:
    wt, own = places["worktree"], places["checkout_modules"]
    chosen = choose_modules(wt, declared=None, environment=None, checkout=places["checkout"])
    assert chosen is not None
    assert (chosen.source, chosen.path, chosen.reachable) == ("checkout", own, True)
    link = wt / "node_modules"
    assert link.is_symlink() and os.readlink(link) == str(own)
    # The compiler finds the project's @types by walking up from the tree's files.
    assert (wt / "node_modules" / "@types" / "jest" / "package.json").is_file()
    # Again in the same tree: the link is recognised, not made twice.
    again = choose_modules(wt, declared=None, environment=None, checkout=places["checkout"])
    assert again == chosen


def test_precedence(places: dict[str, Path], tmp_path: Path) -> None:
    wt, checkout = places["worktree"], places["checkout"]

    def source(tree: Path, **given: Path | None) -> str | None:
        found = choose_modules(tree, **{"declared": None, "environment": None, **given})  # type: ignore[arg-type]
        return found.source if found is not None else None

    # The prepared environment wins over the checkout's node_modules (possibly stale).
    assert source(wt, environment=places["env"], checkout=checkout) == "environment"
    assert os.readlink(wt / "node_modules") == str(places["env"])
    # The setting wins over everything (a new tree, as each run has).
    other = tmp_path / "wt2"
    other.mkdir()
    assert (
        source(other, declared=places["setting"], environment=places["env"], checkout=checkout)
        == "setting"
    )
    # A tree with a node_modules of its own keeps it, whatever else there is.
    tree = tmp_path / "vendored"
    _modules(tree / "node_modules", "jest")
    assert source(tree, environment=places["env"], checkout=checkout) == "tree"
    assert not (tree / "node_modules").is_symlink()
    # Nothing at all: Autopilot's tools alone.
    bare = tmp_path / "bare"
    bare.mkdir()
    assert source(bare, checkout=tmp_path / "no-checkout") is None
    assert not os.path.lexists(bare / "node_modules")


def test_never_replaces_an_entry_of_the_tree_nor_links_in_the_checkout(
    places: dict[str, Path], tmp_path: Path
) -> None:
    tree = tmp_path / "odd"
    tree.mkdir()
    (tree / "node_modules").write_text("a file, not ours to replace\n")
    chosen = choose_modules(tree, declared=None, environment=places["env"], checkout=None)
    assert chosen is not None and chosen.source == "environment" and not chosen.reachable
    assert (tree / "node_modules").read_text() == "a file, not ours to replace\n"
    # A project inside the user's checkout (no node_modules of its own) is never written to.
    inner = places["checkout"] / "packages" / "web"
    inner.mkdir(parents=True)
    chosen = choose_modules(
        inner, declared=None, environment=places["env"], checkout=places["checkout"]
    )
    assert chosen is not None and not chosen.reachable
    assert not os.path.lexists(inner / "node_modules")


def test_a_linked_node_modules_needs_no_compiler_overrides_but_is_shown(
    places: dict[str, Path],
) -> None:
    wt = places["worktree"]
    tools = resolve_tools(wt, environment=places["env"])
    assert tools.project_modules == places["env"] and tools.reachable
    assert tools.unreachable(wt) is None
    assert compiler_overrides(wt, tools) == {"pretty": False}
    assert tools.node_path().startswith(str(places["env"]))
    chain = NodeJestToolchain(environment=places["env"])
    assert str(places["env"]) in chain.sandbox_dirs(wt)


def test_an_unlinkable_node_modules_falls_back_to_node_path_and_type_roots(
    places: dict[str, Path], tmp_path: Path
) -> None:
    tree = tmp_path / "odd"
    tree.mkdir()
    (tree / "node_modules").write_text("x\n")
    tools = resolve_tools(tree, environment=places["env"])
    assert tools.unreachable(tree) == places["env"]
    roots = compiler_overrides(tree, tools)["typeRoots"]
    assert isinstance(roots, list) and roots[0] == f"{places['env']}/@types"


def test_the_settings_know_the_checkout_and_the_toolchain_uses_it(
    places: dict[str, Path],
) -> None:
    settings = load_settings(places["checkout"])
    assert settings.loaded_from == places["checkout"]
    assert settings.model_copy(update={"prepare": ["x"]}).loaded_from == places["checkout"]
    chain = NodeJestToolchain.from_settings(settings)
    tools = chain.tools(places["worktree"])  # type: ignore[attr-defined]
    assert tools.project_modules == places["checkout_modules"]
    # The prepared environment, once the run has one, comes first; a setting keeps its own.
    env = type("Env", (), {"stack": "node", "path": str(places["env"].parent), "interpreter": None})
    using = chain.using_env(env())
    assert using.tools(places["worktree"]).project_modules == places["env"]  # type: ignore[attr-defined]
    assert chain.env_builder() is not None
    declared = NodeJestToolchain(node_modules=str(places["setting"]))
    assert declared.env_builder() is None and declared.using_env(env()) is declared


@pytest.mark.parametrize(
    ("scripts", "flags"),
    [
        ({"test": "node --experimental-vm-modules node_modules/jest/bin/jest.js"}, True),
        ({"test": "NODE_OPTIONS=--experimental-vm-modules npx jest --ci"}, True),
        ({"test": "cross-env NODE_OPTIONS='--experimental-vm-modules' jest"}, True),
        ({"test": "jest", "build": "node --experimental-vm-modules build.js"}, False),
        ({"test": "mocha"}, False),
    ],
)
def test_node_options_of_the_projects_jest_script(
    tmp_path: Path, scripts: dict[str, str], flags: bool
) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"name": "p", "scripts": scripts}))
    assert node_flags(tmp_path) == (["--experimental-vm-modules"] if flags else [])


def test_node_options_of_the_makefiles_jest_recipe(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"scripts": {"test": "npx jest"}}')
    (tmp_path / "Makefile").write_text(
        "lint:\n\tnode --experimental-vm-modules lint.js\n"
        "test:\n\tNODE_OPTIONS=--experimental-vm-modules npx jest\n"
    )
    assert node_flags(tmp_path) == ["--experimental-vm-modules"]
    (tmp_path / "Makefile").write_text("lint:\n\tnode --experimental-vm-modules lint.js\n")
    assert node_flags(tmp_path) == []


def test_the_projects_eslint_runs_only_its_own_configuration(places: dict[str, Path]) -> None:
    wt = places["worktree"]
    _modules(places["env"], "eslint")
    tools = resolve_tools(wt, environment=places["env"])
    ours = str(tools.modules / "eslint" / "bin" / "eslint.js")
    theirs = str(places["env"] / "eslint" / "bin" / "eslint.js")
    # No configuration of the project's: Autopilot's ESLint 9 with its default (an older
    # ESLint of the project could not read it).
    argv = eslint_argv(wt, tools, ["a.test.js"], False)
    assert argv[1] == ours and "--config" in argv and "--no-warn-ignored" in argv
    # A legacy configuration: the project's ESLint, without the flat-only option (ESLint 8
    # and older refuse it).
    (wt / ".eslintrc.json").write_text("{}\n")
    argv = eslint_argv(wt, tools, ["a.test.js"], False)
    assert argv[1] == theirs and "--config" not in argv and "--no-warn-ignored" not in argv
    (wt / ".eslintrc.json").unlink()
    (wt / "eslint.config.mjs").write_text("export default [];\n")
    argv = eslint_argv(wt, tools, ["a.test.js"], False)
    assert argv[1] == theirs and "--no-warn-ignored" in argv
