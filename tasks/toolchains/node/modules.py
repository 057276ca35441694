"""Which ``node_modules`` a run uses, and how the run's tree reaches it.

The first that applies:

1. the ``node_modules`` setting: the user's own install (relative settings are resolved
   against the checkout);
2. the tree's own ``node_modules``: a directory in the tree the run happens in (committed, made
   by a ``prepare`` command, or a run in the checkout itself);
3. the prepared environment (:mod:`tasks.toolchains.node.prepared`): ``npm ci`` of the
   project's ``package-lock.json`` or ``npm-shrinkwrap.json``, once per lock, under
   ``$AUTOPILOT_HOME/envs/node-<key>``;
4. the checkout's ``node_modules`` (the directory the settings were loaded for), for a project
   with nothing to prepare (no npm lock file, or ``[envs] prepare = false``);
5. none: Autopilot's own tools (:mod:`tasks.toolchains.node.tools`).

A project ``node_modules`` the tree does not hold (1, 3, 4) is linked into it:
``<tree>/node_modules`` becomes a symbolic link to it. Everything that finds packages by walking
up from a file then finds it where ``npx jest`` in the checkout does: Node's ``require`` and
``import`` (ES modules ignore ``NODE_PATH``), Jest's resolver and its ``preset``, the TypeScript
compiler's ``@types`` and module resolution (it never reads ``NODE_PATH``: without the link a
project's own Jest configuration compiled its tests without ``@types/jest``), ESLint's plugins.
A link rather than a bind mount: it works the same on every sandbox backend (``none`` too) and
leaves no mount point in the worktree; the sandbox shows its target read-only. The real paths
of the packages then lie in the target, always under a ``/node_modules/`` directory, so Jest's
default ``transformIgnorePatterns`` and coverage exclusions hold. The link is made only where
the tree has no ``node_modules`` entry at all (never over the tree's own, never in the user's
checkout); worktrees are throwaway, and the file jobs' copies leave ``node_modules`` out and get
their own link.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: Where a project's node_modules came from (see the module docstring).
ModulesSource = Literal["setting", "tree", "environment", "checkout"]
NAME = "node_modules"


@dataclass(frozen=True)
class ProjectModules:
    """The project's ``node_modules`` of one run."""

    #: The directory holding the packages (absolute; the link's target when linked).
    path: Path
    source: ModulesSource
    #: Whether ``<tree>/node_modules`` leads to :attr:`path` (the tree's own, or linked), so
    #: walking up from the tree's files finds it.
    reachable: bool

    def describe(self) -> str:
        """One line for the run's ``prepared`` notes."""
        where = {
            "setting": "the node_modules setting",
            "tree": "the tree's own",
            "environment": f"the prepared environment {self.path.parent.name}",
            "checkout": "the checkout's",
        }[self.source]
        how = "" if self.source == "tree" else (" (linked)" if self.reachable else " (NODE_PATH)")
        return f"node_modules: {where}{how}, {self.path}"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def choose_modules(
    repo: Path,
    *,
    declared: Path | None,
    environment: Path | None,
    checkout: Path | None,
) -> ProjectModules | None:
    """The project ``node_modules`` of a run in `repo` by the precedence above, linked into
    `repo` when the tree does not hold it; None when the run uses Autopilot's tools only.

    Args:
        repo: the tree the run happens in (a worktree, a file job's copy, or the checkout).
        declared: the ``node_modules`` setting, already checked to be a directory.
        environment: the prepared environment's ``node_modules``.
        checkout: the directory the settings were loaded for (the user's checkout).
    """
    root = repo.resolve()
    own = root / NAME
    given: list[tuple[Path | None, ModulesSource]] = [
        (declared, "setting"),
        (environment, "environment"),
    ]
    found = [(Path(os.path.abspath(p)), src) for p, src in given if p is not None and p.is_dir()]
    if checkout is not None and not _same(checkout, root) and (checkout / NAME).is_dir():
        found.append((Path(os.path.abspath(checkout / NAME)), "checkout"))
    if own.is_dir():
        # The tree's own, or the link an earlier run in this tree made: to the first choice
        # (kept), or to one that now comes later (a toolchain made before the run's prepared
        # environment was known linked the checkout's): linked again.
        ours = [i for i, (path, _) in enumerate(found) if _same(path, own)]
        if ours and (ours[0] == 0 or not own.is_symlink()):
            path, source = found[ours[0]]
            return ProjectModules(path, source, True)
        if ours:
            with contextlib.suppress(FileNotFoundError):  # another job of the run did it
                own.unlink()
        elif declared is None:
            return ProjectModules(own, "tree", True)
    if not found:
        return None
    path, source = found[0]
    if os.path.lexists(own):
        # The tree has an entry of its own there: never replaced.
        log.info("%s: the tree's own %s is kept, %s is not linked", root, NAME, path)
        return ProjectModules(path, source, False)
    return ProjectModules(path, source, _link(own, path, checkout))


def _link(own: Path, target: Path, checkout: Path | None) -> bool:
    """Link ``<tree>/node_modules`` to `target`; never inside the user's checkout."""
    if checkout is not None and own.parent.resolve().is_relative_to(checkout.resolve()):
        return False
    try:
        own.symlink_to(target, target_is_directory=True)
    except FileExistsError:
        return _same(own, target)  # another job of the same run linked it first
    except OSError as exc:
        log.warning("cannot link %s to %s: %s", own, target, exc)
        return False
    return True
