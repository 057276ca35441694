"""Line coverage from SimpleCov, coverage.py JSON, Cobertura XML and lcov reports.

Every parser returns ``dict[str, FileCoverage]`` keyed by the repository-relative POSIX path.
Path policy: absolute paths are made relative to ``repo`` (or to one of ``aliases``, the paths the
repository had where the report was written, e.g. a container mount); relative paths are taken as
relative to the report's own base (Cobertura ``<source>``) or else to ``repo``. Files outside the
repository (gems, the standard library, site-packages) are dropped: they can never be a target of
generation, and keeping absolute paths would mix two key spaces in one dict.

Reports are untrusted: a file that cannot be read or parsed raises
:class:`tasks.core.errors.CoverageError` with one line naming the file and the reason.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NamedTuple

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, iterparse

from tasks.core.errors import CoverageError
from tasks.core.types import FileCoverage
from tasks.facts.branches import (
    merge_simplecov_branches,
    with_coverage_py_branches,
    with_simplecov_branches,
)

log = logging.getLogger(__name__)

CoverageFormat = Literal["simplecov", "coverage-json", "cobertura", "lcov"]

#: Lines per file as {line number: hit count}; 0 hits means executable but never run.
_Hits = dict[int, int]


def parse_coverage(path: Path, repo: Path, aliases: Sequence[Path] = ()) -> dict[str, FileCoverage]:
    """Parse any supported coverage report, detecting its format from its content.

    Args:
        path: the report (``.resultset.json``, ``coverage.json``, ``coverage.xml``, ``lcov.info``).
        repo: the repository the report is about; keys are made relative to it.
        aliases: other absolute paths that meant the repository root when the report was
            written, e.g. the mount point of the worktree inside a docker sandbox.

    Returns:
        Per-file coverage keyed by repository-relative path. Files outside ``repo`` are dropped.

    Raises:
        CoverageError: the file cannot be read, its format is unknown, or it is malformed.
    """
    where = _where(repo, tuple(aliases))
    fmt = _sniff(path)
    if fmt == "cobertura":
        return _cobertura(path, where)
    if fmt == "lcov":
        return _lcov(path, where)
    data = _load_json(path)  # loaded once, then dispatched on its shape
    if _is_coverage_json(data):
        return _coverage_json(data, path, where)
    return _simplecov(data, path, where)


def detect_format(path: Path) -> CoverageFormat:
    """Tell the report format from the file's content (never from its name).

    Raises:
        CoverageError: unreadable file or no known format.
    """
    fmt = _sniff(path)
    if fmt != "json":
        return fmt
    return "coverage-json" if _is_coverage_json(_load_json(path)) else "simplecov"


def _sniff(path: Path) -> CoverageFormat | Literal["json"]:
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise CoverageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text:
        raise CoverageError(f"{path}: empty coverage report")
    if text.startswith("<"):
        return "cobertura"
    if text.startswith("{"):
        return "json"
    if text.splitlines()[0].strip().startswith(("TN:", "SF:")):
        return "lcov"
    raise CoverageError(
        f"{path}: unknown coverage format (not SimpleCov, coverage.py, Cobertura or lcov)"
    )


def _is_coverage_json(data: dict[str, Any]) -> bool:
    # coverage.py always writes a "meta" block; SimpleCov's top level is command names.
    return "files" in data and isinstance(data.get("meta"), dict)


def load_simplecov(path: Path, repo: Path, aliases: Sequence[Path] = ()) -> dict[str, FileCoverage]:
    """Parse a SimpleCov ``coverage/.resultset.json``, merging every command in it.

    A line is executable when any command saw it as relevant and covered when any command ran it;
    this is how SimpleCov itself merges results. Both the old per-file array format and the
    0.18+ ``{"lines": [...], "branches": ...}`` format are read.
    """
    return _simplecov(_load_json(path), path, _where(repo, tuple(aliases)))


def _simplecov(data: dict[str, Any], path: Path, where: _Where) -> dict[str, FileCoverage]:
    merged: dict[str, _Hits] = {}
    branches: dict[str, dict[tuple[int, str], int]] = {}
    for command, result in data.items():
        if not isinstance(result, dict) or not isinstance(result.get("coverage"), dict):
            raise CoverageError(f"{path}: command {command!r} has no 'coverage' object")
        for file, entry in result["coverage"].items():
            lines = entry.get("lines") if isinstance(entry, dict) else entry
            if not isinstance(lines, list):
                raise CoverageError(f"{path}: {file}: no line array in command {command!r}")
            hits: _Hits = {}
            for number, value in enumerate(lines, start=1):
                # null: not relevant; "ignored": excluded by :nocov: in some SimpleCov versions.
                if value is None or value == "ignored":
                    continue
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise CoverageError(f"{path}: {file}: bad hit count {value!r} on line {number}")
                hits[number] = value
            _merge_into(merged, file, hits)
            if isinstance(entry, dict) and isinstance(entry.get("branches"), dict):
                merge_simplecov_branches(branches.setdefault(file, {}), entry["branches"])
    result = _finish(merged, where, bases=[], report=path)
    for file, taken in branches.items():
        key = _relativise(file, where, [where.repo])
        if key in result:
            result[key] = with_simplecov_branches(result[key], taken)
    return result


def _coverage_json(data: dict[str, Any], path: Path, where: _Where) -> dict[str, FileCoverage]:
    files = data.get("files")
    if not isinstance(files, dict):
        raise CoverageError(f"{path}: no 'files' object")
    merged: dict[str, _Hits] = {}
    for file, entry in files.items():
        try:
            executed = [int(n) for n in entry["executed_lines"]]
            missing = [int(n) for n in entry["missing_lines"]]
        except (KeyError, TypeError, ValueError):
            raise CoverageError(f"{path}: {file}: missing or bad executed/missing lines") from None
        hits: _Hits = {n: 0 for n in missing}
        hits.update({n: 1 for n in executed})
        _merge_into(merged, file, hits)
    result = _finish(merged, where, bases=[], report=path)
    keys = [(_relativise(file, where, [where.repo]), entry) for file, entry in files.items()]
    seen = Counter(key for key, _ in keys)
    for key, entry in keys:
        if key in result and seen[key] == 1:
            result[key] = _statements(result[key], entry)
        if key in result and isinstance(entry, dict) and "missing_branches" in entry:
            result[key] = with_coverage_py_branches(result[key], entry)
    return result


def _statements(cov: FileCoverage, entry: dict[str, Any]) -> FileCoverage:
    """The summary's statement counts: an older coverage.py (7.2) lists every line that ran in
    ``executed_lines``, statements or not (a class docstring), so only ``num_statements``
    and ``covered_lines`` count as coverage.py counts them."""
    summary = entry.get("summary")
    try:
        statements = int(summary["num_statements"])  # type: ignore[index]
        covered = int(summary["covered_lines"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return cov
    if covered + len(cov.uncovered_lines) != statements or covered > cov.covered_lines:
        return cov  # not a summary of these lines
    return cov.model_copy(update={"executable_lines": statements, "covered_lines": covered})


def _cobertura(path: Path, where: _Where) -> dict[str, FileCoverage]:
    sources: list[Path] = []
    merged: dict[str, _Hits] = {}
    root_seen = False
    try:
        for event, elem in iterparse(str(path), events=("start", "end"), forbid_dtd=True):
            tag = elem.tag.rsplit("}", 1)[-1]
            if event == "start":
                if not root_seen and tag != "coverage":
                    raise CoverageError(f"{path}: not a Cobertura report (root element <{tag}>)")
                root_seen = True
                continue
            if tag == "source" and elem.text and elem.text.strip():
                sources.append(Path(elem.text.strip()))
            elif tag == "class":
                file = elem.get("filename")
                if not file:
                    raise CoverageError(f"{path}: <class> without a filename attribute")
                hits: _Hits = {}
                lines = elem.find("lines")
                for line in lines.findall("line") if lines is not None else []:
                    try:
                        number, count = int(line.get("number", "")), int(line.get("hits", ""))
                    except ValueError:
                        raise CoverageError(
                            f"{path}: {file}: <line> with a bad number or hits attribute"
                        ) from None
                    hits[number] = max(hits.get(number, 0), count)
                _merge_into(merged, file, hits)
                # Classes are done with: free them so a large report streams in bounded memory.
                elem.clear()
    except ParseError as exc:
        raise CoverageError(f"{path}: malformed XML: {exc}") from None
    except DefusedXmlException as exc:
        raise CoverageError(f"{path}: refused XML construct: {type(exc).__name__}") from None
    except OSError as exc:
        raise CoverageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _finish(
        merged, where, bases=[_source_in_repo(src, where) for src in sources], report=path
    )


def _lcov(path: Path, where: _Where) -> dict[str, FileCoverage]:
    merged: dict[str, _Hits] = {}
    current: str | None = None
    hits: _Hits = {}
    for number, line in _read_lines(path):
        if line.startswith("SF:"):
            current, hits = line[3:].strip(), {}
        elif line.startswith("DA:"):
            if current is None:
                raise CoverageError(f"{path}: line {number}: DA record before any SF record")
            fields = line[3:].split(",")
            try:
                lineno, count = int(fields[0]), int(float(fields[1]))
            except (IndexError, ValueError):
                raise CoverageError(f"{path}: line {number}: bad DA record {line!r}") from None
            hits[lineno] = max(hits.get(lineno, 0), count)
        elif line == "end_of_record":
            if current is None:
                raise CoverageError(f"{path}: line {number}: end_of_record without SF")
            _merge_into(merged, current, hits)
            current = None
    if current is not None:
        raise CoverageError(f"{path}: truncated: record for {current} has no end_of_record")
    return _finish(merged, where, bases=[], report=path)


def merge_coverage(*reports: dict[str, FileCoverage]) -> dict[str, FileCoverage]:
    """Merge already parsed reports (e.g. one per spec run): covered if covered in any.

    The reports must be about the same version of each file (same executable lines). A line
    stays uncovered only when every report that has the file leaves it uncovered; a file that
    only some reports have (not loaded by the others) keeps those reports' verdict.
    """
    by_file: dict[str, list[FileCoverage]] = {}
    for report in reports:
        for key, cov in report.items():
            by_file.setdefault(key, []).append(cov)
    out: dict[str, FileCoverage] = {}
    for key, covs in by_file.items():
        uncovered = set.intersection(*(set(c.uncovered_lines) for c in covs))
        executable = max(c.executable_lines for c in covs)
        known = [set(c.executed_lines) for c in covs if c.executed_lines is not None]
        out[key] = FileCoverage(
            path=key,
            executable_lines=executable,
            covered_lines=executable - len(uncovered),
            uncovered_lines=sorted(uncovered),
            executed_lines=sorted(set().union(*known) - uncovered) if known else None,
        )
    return out


# --- helpers ---------------------------------------------------------------------------------


def _load_json(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise CoverageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CoverageError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CoverageError(f"{path}: expected a JSON object at the top level")
    return data


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                yield number, line.strip()
    except OSError as exc:
        raise CoverageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _merge_into(merged: dict[str, _Hits], file: str, hits: _Hits) -> None:
    target = merged.setdefault(file, {})
    for number, count in hits.items():
        target[number] = max(target.get(number, 0), count)


class _Where(NamedTuple):
    """The repository root, and other absolute paths that meant that root in the report."""

    repo: Path
    aliases: tuple[Path, ...]
    #: Every form of the root a file's path is tried against (computed once, by `_where`).
    roots: tuple[Path, ...]


def _where(repo: Path, aliases: tuple[Path, ...] = ()) -> _Where:
    roots = [Path(os.path.normpath(repo.absolute())), repo.resolve()]
    roots += [Path(os.path.normpath(a)) for a in aliases]
    return _Where(repo, aliases, tuple(dict.fromkeys(roots)))


def _finish(
    merged: dict[str, _Hits], where: _Where, bases: list[Path], report: Path
) -> dict[str, FileCoverage]:
    """Relativise paths, drop outsiders, and turn hit maps into FileCoverage."""
    out: dict[str, _Hits] = {}
    for file, hits in merged.items():
        key = _relativise(file, where, [*bases, where.repo])
        if key is None:
            log.debug("%s: %s is outside %s; dropped", report, file, where.repo)
            continue
        _merge_into(out, key, hits)
    return {key: _to_file_coverage(key, hits) for key, hits in sorted(out.items())}


def _to_file_coverage(key: str, hits: _Hits) -> FileCoverage:
    uncovered = sorted(n for n, c in hits.items() if c == 0)
    return FileCoverage(
        path=key,
        executable_lines=len(hits),
        covered_lines=len(hits) - len(uncovered),
        uncovered_lines=uncovered,
        executed_lines=sorted(n for n, c in hits.items() if c > 0),
    )


def _source_in_repo(source: Path, where: _Where) -> Path:
    """A Cobertura <source> as a directory of this repository when it can be recognised.

    A source written on another machine (CI, a container) is outside the repository; when a
    trailing part of it (``.../src``) is a directory of the repository, that directory is meant.
    """
    if not source.is_absolute() or _under(source, where) is not None:
        return source
    parts = source.parts[1:]
    for start in range(len(parts)):
        if (where.repo.joinpath(*parts[start:])).is_dir():
            return where.repo.joinpath(*parts[start:])
    return source


def _relativise(file: str, where: _Where, bases: list[Path]) -> str | None:
    """Repository-relative POSIX path of `file`, or None when it lies outside the repository.

    A relative name is tried against each base in turn: the first under which the file exists
    in the repository wins, else the first base inside the repository at all.
    """
    name = Path(file)
    fulls = [name] if name.is_absolute() else [where.repo / base / name for base in bases]
    rels = [r for f in fulls if (r := _under(f, where)) is not None and r.parts]
    existing = [r for r in rels if (where.repo / r).exists()]
    chosen = existing or rels
    return chosen[0].as_posix() if chosen else None


def _under(path: Path, where: _Where) -> PurePosixPath | None:
    """`path` relative to the repository (or an alias of it), or None if outside."""
    norm = Path(os.path.normpath(path))
    for root in where.roots:
        if norm.is_relative_to(root):
            return PurePosixPath(*norm.relative_to(root).parts)
    # The symlink-resolved form matters for temp dirs reached through a symlink (resolved
    # only when needed: a report names every file of the project, and each run is parsed).
    real = Path(os.path.realpath(norm))
    for root in where.roots:
        if real.is_relative_to(root):
            return PurePosixPath(*real.relative_to(root).parts)
    return None
