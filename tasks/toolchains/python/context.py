"""The prompt context of a Python source: conftest files, the test configuration, the project
modules it imports (read with :mod:`ast`, resolved inside the project); and the versions.
"""

from __future__ import annotations

import ast
import logging
import re
import sys
from pathlib import Path, PurePosixPath

from tasks.core.secrets import read_if_allowed
from tasks.toolchains.python.parse import parse

log = logging.getLogger(__name__)

#: At most this many referenced files per source (the context budget bounds their size).
MAX_REFERENCED = 12


def context_paths(project: Path, source: str, source_text: str) -> list[str]:
    """The conftest files and the test configuration, then the project modules the source
    imports."""
    paths = ["tests/conftest.py", "pyproject.toml", "setup.cfg", "pytest.ini"]
    paths += sorted(
        p.relative_to(project).as_posix()
        for p in (project / "tests").glob("**/conftest.py")
        if p.relative_to(project).as_posix() != "tests/conftest.py"
    )
    return paths + imported_files(project, source, source_text)


def python_versions(project: Path) -> dict[str, str]:
    """The interpreter the tests run with (this one) and the project's declared requirement."""
    versions = {"python": ".".join(str(v) for v in sys.version_info[:3])}
    pyproject = read_if_allowed(project, "pyproject.toml", 40_000)
    if pyproject:
        match = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.MULTILINE)
        if match:
            versions["requires-python"] = match.group(1)
    try:
        from importlib.metadata import version

        versions["pytest"] = version("pytest")
    except Exception:  # a missing distribution only drops one line
        pass
    return versions


def _module_file(project: Path, parts: list[str]) -> str | None:
    """The project file of a dotted module (``src/`` layout or flat), if it is the project's."""
    if not parts:
        return None
    for root in ("src", "."):
        base = project / root if root != "." else project
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            if candidate.is_file():
                return candidate.relative_to(project).as_posix()
    return None


def _package_parts(project: Path, source: str) -> list[str]:
    """The dotted package of a source file: its directories below ``src/`` (or the root)."""
    parts = list(PurePosixPath(source).parent.parts)
    if parts and parts[0] == "src" and (project / "src").is_dir():
        parts = parts[1:]
    return parts


def imported_files(project: Path, source: str, source_text: str) -> list[str]:
    """The project modules a Python source imports, in import order.

    Absolute imports are resolved under ``src/`` and the root; relative ones against the
    source's package. ``from pkg import name`` also finds a submodule ``pkg/name.py``. Standard
    library and third-party imports resolve to nothing. A source that does not parse has none.
    """
    try:
        tree = parse(source_text)
    except (SyntaxError, ValueError):
        return []
    package = _package_parts(project, source)
    found: list[str] = []

    def add(parts: list[str]) -> None:
        rel = _module_file(project, parts)
        if rel is not None and rel != source and rel not in found:
            found.append(rel)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                keep = len(package) - (node.level - 1)
                if keep < 0:
                    continue
                base = package[:keep]
            else:
                base = []
            module = base + (node.module.split(".") if node.module else [])
            add(module)
            for alias in node.names:
                if alias.name != "*":
                    add([*module, alias.name])
    return found[:MAX_REFERENCED]
