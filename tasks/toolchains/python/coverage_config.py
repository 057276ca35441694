"""The project's own coverage.py configuration: what it measures (``[run] source``,
``source_pkgs``, ``include``) and what it leaves out (``[run] omit``, ``[report] omit``).

Read as coverage.py reads it, never by running it: the first of ``.coveragerc`` (sections
``[run]``, ``[report]``), ``setup.cfg`` and ``tox.ini`` (``[coverage:run]``...) and
``pyproject.toml`` (``[tool.coverage.run]``...) that configures coverage (``COVERAGE_RCFILE``
is not read: a worktree's run has a cleared environment). File patterns follow coverage.py 7:
a pattern without a slash matches a file name anywhere, ``**/`` any directories, ``*`` within
one path part, a trailing ``/*`` everything below; a pattern that does not start with a
wildcard is relative to the project.

The run (:mod:`tasks.toolchains.python.run`) leaves these settings to coverage.py instead of
overriding them on its command line, and the file rules
(:mod:`tasks.toolchains.python.files`) take as sources only what the project measures.
"""

from __future__ import annotations

import configparser
import logging
import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

log = logging.getLogger(__name__)

#: Where coverage.py looks, in its order: (file, section prefix; None for TOML).
CONFIG_FILES = (
    (".coveragerc", ""),
    ("setup.cfg", "coverage:"),
    ("tox.ini", "coverage:"),
    ("pyproject.toml", None),
)


@dataclass(frozen=True)
class CoverageConfig:
    """The measured-file settings of one project's coverage configuration."""

    #: The file they came from (project-relative), None without one.
    file: str | None = None
    source: tuple[str, ...] = ()
    source_pkgs: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    #: ``[run] omit`` (never measured) and ``[report] omit`` (measured, never reported).
    run_omit: tuple[str, ...] = ()
    report_omit: tuple[str, ...] = ()

    @property
    def chooses_sources(self) -> bool:
        """Whether the project says what to measure (then no ``--source`` of ours)."""
        return bool(self.source or self.source_pkgs or self.include)

    def source_dirs(self, repo: Path) -> list[str]:
        """``source`` and ``source_pkgs`` with each package name that is a directory of the
        worktree (``src/pkg``, ``pkg``) given as that directory: coverage.py finds the files
        of a package the tests never imported only through its directory."""
        found: list[str] = []
        for entry in (*self.source, *self.source_pkgs):
            package = PurePosixPath(*entry.split(".")) if entry.strip(".") else None
            dirs = (
                [base / package for base in (PurePosixPath("src"), PurePosixPath())]
                if (package is not None and not (repo / entry).is_dir())
                else []
            )
            found.append(next((d.as_posix() for d in dirs if (repo / d).is_dir()), entry))
        return list(dict.fromkeys(found))

    @cached_property
    def _omit(self) -> re.Pattern[str] | None:
        omit = (*self.run_omit, *self.report_omit)
        return globs_to_regex(omit) if omit else None

    @cached_property
    def _include(self) -> re.Pattern[str] | None:
        return globs_to_regex(self.include) if self.include else None

    def measures(self, repo: Path, path: str) -> bool:
        """Whether coverage.py measures the project file `path` (POSIX, relative) under this
        configuration: inside ``source`` (directories or packages; else ``include``), and not
        omitted."""
        absolute = (repo.resolve() / path).as_posix()
        if self._omit is not None and (self._omit.match(path) or self._omit.match(absolute)):
            return False
        if self.source or self.source_pkgs:
            return any(_inside(repo, path, s) for s in (*self.source, *self.source_pkgs))
        if self._include is not None:
            return bool(self._include.match(path) or self._include.match(absolute))
        return True


def _inside(repo: Path, path: str, source: str) -> bool:
    """`path` is under the source directory or in the package `source` names."""
    as_dir = PurePosixPath(source.rstrip("/"))
    if not as_dir.parts or as_dir == PurePosixPath("."):
        return True
    if (repo / as_dir).is_dir():
        return PurePosixPath(path).is_relative_to(as_dir)
    package = PurePosixPath(*source.split("."))
    parts = PurePosixPath(path)
    return any(
        parts.is_relative_to(base / package) for base in (PurePosixPath("src"), PurePosixPath())
    )


def coverage_config(repo: Path) -> CoverageConfig:
    """The project's coverage configuration (an empty one when it has none)."""
    for name, prefix in CONFIG_FILES:
        path = repo / name
        if not path.is_file():
            continue
        read = _toml(path) if prefix is None else _ini(path, prefix, own=name == ".coveragerc")
        if read is None:
            continue
        run, report = read
        return CoverageConfig(
            file=name,
            source=_list(run.get("source")),
            source_pkgs=_list(run.get("source_pkgs")),
            include=_list(run.get("include")),
            run_omit=_list(run.get("omit")),
            report_omit=_list(report.get("omit")),
        )
    return CoverageConfig()


def _ini(path: Path, prefix: str, *, own: bool) -> tuple[dict[str, Any], dict[str, Any]] | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError) as exc:
        log.info("%s: unreadable (%s); coverage.py's defaults assumed", path, exc)
        return None
    if not own and not any(s.startswith(prefix) for s in parser.sections()):
        return None

    def section(name: str) -> dict[str, Any]:
        key = f"{prefix}{name}"
        return dict(parser.items(key)) if parser.has_section(key) else {}

    return section("run"), section("report")


def _toml(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        with path.open("rb") as fh:
            tool = tomllib.load(fh).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    found = tool.get("coverage") if isinstance(tool, dict) else None
    if not isinstance(found, dict):
        return None
    run, report = found.get("run"), found.get("report")
    return (run if isinstance(run, dict) else {}), (report if isinstance(report, dict) else {})


def _list(value: Any) -> tuple[str, ...]:
    """An ini list (comma- or line-separated) or a TOML list, as coverage.py reads them."""
    if isinstance(value, str):
        items = re.split(r"[,\n]", value)
    elif isinstance(value, list):
        items = [v for v in value if isinstance(v, str)]
    else:
        return ()
    return tuple(item.strip() for item in items if item.strip())


def globs_to_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching a path (relative or absolute, POSIX) that any pattern matches."""
    return re.compile("|".join(f"(?:{_glob(p)})" for p in patterns) + r"\Z")


def _glob(pattern: str) -> str:
    pattern = pattern.replace("\\", "/").removeprefix("./")
    if "/" not in pattern:
        pattern = f"**/{pattern}"
    out: list[str] = []
    pos = 0
    while pos < len(pattern):
        rest = pattern[pos:]
        if (pos == 0 and (m := re.match(r"\*+/", rest))) or (m := re.match(r"\*\*/", rest)):
            out.append("(?:.*/)?")
        elif m := re.match(r"/\*+\Z", rest):
            out.append("/.*")
        elif m := re.match(r"\*+", rest):
            out.append("[^/]*")
        elif m := re.match(r"\?", rest):
            out.append("[^/]")
        elif m := re.match(r"\[[^\]]*\]", rest):
            out.append(m.group(0))
        else:
            m = re.match(r".", rest, re.DOTALL)
            assert m is not None
            out.append(re.escape(m.group(0)))
        pos += m.end()
    return "".join(out)
