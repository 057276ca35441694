"""Where Autopilot's data files are, in a checkout and in an installed wheel alike.

Every prompt, skill, the rubric, the calibration cases and the toolchains' helper files are
found through :func:`resource_path`, by their path in the repository (``"prompts"``,
``"skills/rails-model.md"``, ``"judge/rubric.md"``, ``"tasks/toolchains/ruby/resources"``):

- a path inside a package (``tasks/...``, ``judge/...``, ``flows/...``) is that package's
  resource (``importlib.resources``), which is the same file in a checkout and in a wheel;
- a top-level data directory (``prompts/``, ``skills/``) is the repository's own in a
  checkout; the wheel carries it inside the ``tasks`` package as ``tasks/_data/<name>``
  (``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml), looked up first so an
  installed copy never reads some other directory that happens to sit beside it.

Nothing is read at import time.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from tasks.core.errors import ConfigError

#: Top-level data directories of the repository, bundled into the wheel under `tasks/_data/`
#: (of ``toolchains/``, only the files that define the stacks' tool installs).
DATA_DIRS = ("prompts", "skills", "toolchains")
#: The packages whose files are resources of their own.
PACKAGES = ("tasks", "judge", "flows")
BUNDLE = "_data"


class ResourceError(ConfigError):
    """A data file Autopilot ships is missing (a broken installation)."""


def _as_path(item: Traversable, name: str) -> Path:
    # Wheels are installed unpacked; a zipped installation is not supported (templates and
    # skills are read as files by Jinja and by the tests' tools).
    if not isinstance(item, Path):
        raise ResourceError(f"{name}: Autopilot must be installed unpacked, not from a zip file")
    return item


def _package_root() -> Path:
    """The directory that holds the `tasks` package (the checkout, or site-packages)."""
    return _as_path(resources.files("tasks"), "tasks").parent


def resource_path(name: str) -> Path:
    """The file or directory shipped with Autopilot at repository path `name`.

    Args:
        name: a repository-relative path whose first part is a package (tasks, judge, flows)
            or a data directory (prompts, skills), e.g. ``"judge/calibration"``.

    Raises:
        ResourceError: unknown top-level name, or the file is missing (a broken install).
    """
    parts = [p for p in name.split("/") if p]
    if not parts or ".." in parts:
        raise ResourceError(f"{name!r}: not a resource path")
    head, rest = parts[0], parts[1:]
    if head in PACKAGES:
        found = _as_path(resources.files(head).joinpath(*rest), name) if rest else None
        candidates = [found] if found is not None else [_package_root() / head]
    elif head in DATA_DIRS:
        bundled = _as_path(resources.files("tasks").joinpath(BUNDLE, *parts), name)
        candidates = [bundled, _package_root().joinpath(*parts)]
    else:
        raise ResourceError(f"{name!r}: not one of Autopilot's resources")
    for path in candidates:
        if path.exists():
            return path
    raise ResourceError(
        f"{name}: missing from this installation of Autopilot ({candidates[0]}); reinstall it"
    )
