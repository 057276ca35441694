"""Where the node-jest toolchain's programs live: Node, and the tools `make setup` installs.

Autopilot's own tools (Jest, ts-jest, TypeScript, jest-junit, ESLint and its default
configuration, jsdom and Testing Library, supertest, the common type packages) are installed by
``make setup`` with ``npm ci --ignore-scripts`` from the committed ``toolchains/node/
package-lock.json`` into ``toolchains/node/node_modules`` of the checkout; an installed wheel
carries the same ``package.json``/lock as resources and installs them under
``$AUTOPILOT_HOME/toolchains/node`` (``python -m tasks.toolchains.node.install``);
``AUTOPILOT_NODE_TOOLS`` names another directory holding the same install. The sandbox shows
that directory read-only; nothing is ever installed during a run.

A project's own ``node_modules`` wins when it has one (the setting, the tree's own, the
prepared environment, the checkout's: :mod:`tasks.toolchains.node.modules` says which, and
links it into the tree). Its Jest, ts-jest, TypeScript and ESLint are used when present; ours
fill the gaps (jest-junit is always ours: the project need not have it).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tasks.toolchains.base import ToolchainError
from tasks.toolchains.node.modules import ProjectModules, choose_modules

#: The environment variable naming another install of the toolchain directory.
TOOLS_ENV = "AUTOPILOT_NODE_TOOLS"
#: The packages Autopilot's install must hold for a run (a partial install is an error).
REQUIRED = ("jest", "ts-jest", "typescript", "jest-junit", "eslint")


def checkout_tools_dir() -> Path:
    """``toolchains/node`` of the checkout this module belongs to."""
    return Path(__file__).resolve().parents[3] / "toolchains" / "node"


def home_tools_dir(home: Path | None = None) -> Path:
    """Where an installed Autopilot keeps the tools: ``<AUTOPILOT_HOME>/toolchains/node``
    (`home`, else ``$AUTOPILOT_HOME``, else ``~/.autopilot``); see
    :mod:`tasks.toolchains.node.install`."""
    if home is None:
        env = os.environ.get("AUTOPILOT_HOME")
        home = Path(env).expanduser() if env else Path.home() / ".autopilot"
    return home / "toolchains" / "node"


def default_tools_dir(home: Path | None = None) -> Path:
    """The toolchain directory: ``$AUTOPILOT_NODE_TOOLS``, else the checkout's
    ``toolchains/node`` when ``make setup`` installed the tools there, else the one under
    Autopilot's home (an installed wheel)."""
    env = os.environ.get(TOOLS_ENV)
    if env:
        return Path(env).resolve()
    checkout = checkout_tools_dir()
    if (checkout / "node_modules").is_dir():
        return checkout
    return home_tools_dir(home)


def find_node() -> str:
    """The ``node`` program (Debian's ``nodejs`` package installs ``/usr/bin/node``).

    Raises:
        ToolchainError: no node on PATH.
    """
    node = shutil.which("node")
    if node is None:
        raise ToolchainError(
            "node is not installed: run `make setup` (it installs Debian's nodejs package)"
        )
    return node


def declared_modules(repo: Path, declared: str | None) -> Path | None:
    """The declared ``node_modules`` (None when there is none). A relative declaration is
    taken from the repository (never outside it); an absolute one is the setting resolved
    against the user's checkout (the worktrees runs happen in hold no ignored
    ``node_modules``), shown read-only to the runs.

    Raises:
        ToolchainError: the declared path leaves the repository or does not exist.
    """
    root = repo.resolve()
    if declared and Path(declared).is_absolute():
        path = Path(declared)
        if not path.is_dir():
            raise ToolchainError(f"node_modules {declared!r}: no such directory")
        return path
    if declared:
        rel = PurePosixPath(declared)
        if ".." in rel.parts:
            raise ToolchainError(f"node_modules {declared!r}: must be a path inside the repository")
        path = (root / rel).resolve()
        if not path.is_relative_to(root) or not path.is_dir():
            raise ToolchainError(f"node_modules {declared!r}: no such directory in {root}")
        return path
    return None


@dataclass(frozen=True)
class NodeTools:
    """The programs of one run: node, and where each tool comes from."""

    node: str
    #: Autopilot's ``toolchains/node`` directory (holds ``node_modules`` and the default
    #: ESLint configuration).
    home: Path
    #: The project's own ``node_modules``: where it is, where it came from, whether the tree
    #: reaches it (None: Autopilot's tools only).
    chosen: ProjectModules | None = None

    @property
    def project_modules(self) -> Path | None:
        """The project's own ``node_modules`` (where its packages are), or None."""
        return self.chosen.path if self.chosen is not None else None

    @property
    def reachable(self) -> bool:
        """Whether the tree reaches :attr:`project_modules` as its ``node_modules`` (its own,
        or linked there): walking up from a file finds the packages."""
        return self.chosen is None or self.chosen.reachable

    @property
    def modules(self) -> Path:
        """Autopilot's ``node_modules``."""
        return self.home / "node_modules"

    def package(self, name: str) -> Path:
        """The directory of package `name`: the project's when it has it, else ours."""
        if self.project_modules is not None:
            own = self.project_modules / name
            if (own / "package.json").is_file():
                return own
        return self.modules / name

    def own(self, name: str) -> bool:
        """Whether package `name` comes from the project's ``node_modules``."""
        return self.project_modules is not None and self.package(name).is_relative_to(
            self.project_modules
        )

    @property
    def jest(self) -> str:
        """Jest's command-line entry point (``jest/bin/jest.js``)."""
        return str(self.package("jest") / "bin" / "jest.js")

    @property
    def eslint(self) -> str:
        """ESLint's command-line entry point (``eslint/bin/eslint.js``)."""
        return str(self.package("eslint") / "bin" / "eslint.js")

    @property
    def junit_reporter(self) -> str:
        """jest-junit, always Autopilot's."""
        return str(self.modules / "jest-junit")

    @property
    def default_eslint_config(self) -> str:
        """The small ESLint configuration for tests of projects without one."""
        return str(self.home / "eslint.config.mjs")

    def sandbox_dirs(self) -> list[str]:
        """What the sandbox must show read-only: Autopilot's toolchain directory, and the
        real locations of anything it links to outside itself. (The project's node_modules
        lies inside the worktree, which is shown anyway.)"""
        dirs = [str(self.home)]
        real = os.path.realpath(self.home)
        if real != str(self.home):
            dirs.append(real)
        return dirs

    def outside(self, repo: Path) -> Path | None:
        """The project's node_modules when it lies outside `repo` (it must be shown too)."""
        modules = self.project_modules
        if modules is None or modules.resolve().is_relative_to(repo.resolve()):
            return None
        return modules

    def unreachable(self, repo: Path) -> Path | None:
        """The project's node_modules when the tree's files cannot find it by walking up
        (outside `repo` and not linked in): only ``NODE_PATH`` and the compiler's options
        the generated configuration sets lead to it."""
        return None if self.reachable else self.outside(repo)

    def node_path(self) -> str:
        """``NODE_PATH``: the project's declared node_modules (which may lie outside the tree,
        where walking up from a file never finds it), then Autopilot's."""
        if self.project_modules is not None:
            return f"{self.project_modules}{os.pathsep}{self.modules}"
        return str(self.modules)


def resolve_tools(
    repo: Path,
    *,
    declared: str | None = None,
    home: Path | None = None,
    environment: Path | None = None,
    checkout: Path | None = None,
) -> NodeTools:
    """The tools of a run in `repo`, the project's node_modules linked into it when the tree
    does not hold it (:func:`tasks.toolchains.node.modules.choose_modules`).

    Args:
        repo: the tree the run happens in.
        declared: the ``node_modules`` setting.
        home: Autopilot's tool install (default: :func:`default_tools_dir`).
        environment: the prepared environment's ``node_modules``.
        checkout: the directory the settings were loaded for (the user's checkout).

    Raises:
        ToolchainError: node is missing, Autopilot's install is missing or partial (run
            ``make setup``), or the declared node_modules is bad.
    """
    home = (home or default_tools_dir()).resolve()
    missing = [n for n in REQUIRED if not (home / "node_modules" / n / "package.json").is_file()]
    if missing:
        raise ToolchainError(
            f"the node toolchain in {home} lacks {', '.join(missing)}: run `make setup` in a "
            "checkout, or `python -m tasks.toolchains.node.install` for an installed Autopilot"
        )
    node = find_node()
    chosen = choose_modules(
        repo,
        declared=declared_modules(repo, declared),
        environment=environment,
        checkout=checkout,
    )
    return NodeTools(node=node, home=home, chosen=chosen)
