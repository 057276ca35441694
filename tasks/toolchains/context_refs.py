"""The project files a source file uses, for its prompt context.

A test can only be right about the code around its target if the model sees it: the classes a
Rails file names (its superclass with the authentication filter, the serializer a controller
renders, the service a model calls), the routes of a controller, the templates of a mailer, the
modules a Python file imports. Found by names, never by running anything: Ruby constants are
mapped to files with the Rails naming rule (``OrderSerializer`` -> ``order_serializer.rb`` under
``app/`` or ``lib/``), Python imports are read with :mod:`ast` and resolved inside the project.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path, PurePosixPath

from tasks.core.types import SourceKind

#: At most this many referenced files per source (the context budget bounds their size).
MAX_REFERENCED = 12
_CONSTANT = re.compile(r"\b[A-Z][A-Za-z0-9]*\b")
_RUBY_ROOTS = ("app", "lib")


def underscore(name: str) -> str:
    """Rails' ``underscore`` of a constant: ``OrderSerializer`` -> ``order_serializer``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _ruby_index(project: Path) -> dict[str, list[str]]:
    """Every ``.rb`` file under app/ and lib/, by file stem."""
    index: dict[str, list[str]] = {}
    for root in _RUBY_ROOTS:
        base = project / root
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.rb")):
            if path.is_file():
                index.setdefault(path.stem, []).append(path.relative_to(project).as_posix())
    return index


def ruby_referenced_files(
    project: Path, source: str, source_text: str, kind: SourceKind
) -> list[str]:
    """Files a Ruby source needs to be understood, most useful first.

    Routes for a controller and templates for a mailer, then the files of the constants the
    source names, in the order it names them.
    """
    found: list[str] = []
    if kind == SourceKind.CONTROLLER and (project / "config/routes.rb").is_file():
        found.append("config/routes.rb")
    if kind == SourceKind.MAILER:
        views = project / "app/views" / PurePosixPath(source).stem
        if views.is_dir():
            found += sorted(
                p.relative_to(project).as_posix() for p in views.rglob("*") if p.is_file()
            )
    index = _ruby_index(project)
    for constant in dict.fromkeys(_CONSTANT.findall(source_text)):
        for rel in index.get(underscore(constant), [])[:3]:
            if rel != source and rel not in found:
                found.append(rel)
    return found[:MAX_REFERENCED]


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


def python_imported_files(project: Path, source: str, source_text: str) -> list[str]:
    """The project modules a Python source imports, in import order.

    Absolute imports are resolved under ``src/`` and the root; relative ones against the
    source's package. ``from pkg import name`` also finds a submodule ``pkg/name.py``. Standard
    library and third-party imports resolve to nothing. A source that does not parse has none.
    """
    try:
        tree = ast.parse(source_text)
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
