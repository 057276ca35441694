"""Line coverage from SimpleCov, coverage.py JSON, Cobertura XML and lcov reports.

Every parser returns ``dict[str, FileCoverage]`` keyed by the repository-relative POSIX path.
Path policy: absolute paths are made relative to ``repo``; relative paths are taken as relative to
the report's own base (Cobertura ``<source>``) or else to ``repo``. Files that fall outside the
repository (gems, the standard library, site-packages) are dropped: they can never be a target of
generation, and keeping absolute paths would mix two key spaces in one dict.

Reports are untrusted: a file that cannot be read or parsed raises
:class:`tasks.errors.CoverageError` with one line naming the file and the reason.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, iterparse

from tasks.errors import CoverageError
from tasks.types import FileCoverage

log = logging.getLogger(__name__)

CoverageFormat = Literal["simplecov", "coverage-json", "cobertura", "lcov"]

#: Lines per file as {line number: hit count}; 0 hits means executable but never run.
_Hits = dict[int, int]


def parse_coverage(path: Path, repo: Path) -> dict[str, FileCoverage]:
    """Parse any supported coverage report, detecting its format from its content.

    Args:
        path: the report (``.resultset.json``, ``coverage.json``, ``coverage.xml``, ``lcov.info``).
        repo: the repository the report is about; keys are made relative to it.

    Returns:
        Per-file coverage keyed by repository-relative path. Files outside ``repo`` are dropped.

    Raises:
        CoverageError: the file cannot be read, its format is unknown, or it is malformed.
    """
    fmt = detect_format(path)
    loaders = {
        "simplecov": load_simplecov,
        "coverage-json": load_coverage_json,
        "cobertura": load_cobertura,
        "lcov": load_lcov,
    }
    return loaders[fmt](path, repo)


def detect_format(path: Path) -> CoverageFormat:
    """Tell the report format from the first bytes of the file (never from its name).

    Raises:
        CoverageError: unreadable file or no known format.
    """
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
        # coverage.py always writes a "meta" block; SimpleCov's top level is command names.
        data = _load_json(path)
        if "files" in data and isinstance(data.get("meta"), dict):
            return "coverage-json"
        return "simplecov"
    first = text.splitlines()[0].strip()
    if first.startswith(("TN:", "SF:")):
        return "lcov"
    raise CoverageError(
        f"{path}: unknown coverage format (not SimpleCov, coverage.py, Cobertura or lcov)"
    )


def load_simplecov(path: Path, repo: Path) -> dict[str, FileCoverage]:
    """Parse a SimpleCov ``coverage/.resultset.json``, merging every command in it.

    A line is executable when any command saw it as relevant and covered when any command ran it;
    this is how SimpleCov itself merges results. Both the old per-file array format and the
    0.18+ ``{"lines": [...], "branches": ...}`` format are read.
    """
    data = _load_json(path)
    merged: dict[str, _Hits] = {}
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
    return _finish(merged, repo, bases=[repo], report=path)


def load_coverage_json(path: Path, repo: Path) -> dict[str, FileCoverage]:
    """Parse a coverage.py JSON report (``coverage json``).

    Uses ``executed_lines`` and ``missing_lines`` (statements; excluded lines are not counted),
    which is exactly what coverage.py's own ``summary`` counts.
    """
    data = _load_json(path)
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
    return _finish(merged, repo, bases=[repo], report=path)


def load_cobertura(path: Path, repo: Path) -> dict[str, FileCoverage]:
    """Parse a Cobertura XML report (coverage.py ``coverage xml``, JaCoCo converters, ...).

    Class ``filename`` attributes are resolved against each ``<sources><source>`` in turn (the
    first one under which the file exists wins), then against ``repo``. Several ``<class>``
    elements for one file (inner classes) are merged. Parsed as a stream, entities refused.
    """
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
    return _finish(merged, repo, bases=[*sources, repo], report=path)


def load_lcov(path: Path, repo: Path) -> dict[str, FileCoverage]:
    """Parse an lcov tracefile (``SF:``, ``DA:line,hits[,checksum]``, ``end_of_record``).

    Records for the same file (one per test in merged tracefiles) are merged.
    """
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
    return _finish(merged, repo, bases=[repo], report=path)


def merge_coverage(*reports: dict[str, FileCoverage]) -> dict[str, FileCoverage]:
    """Merge already parsed reports (e.g. one per spec run): covered if covered in any.

    Executable lines are the union; covered lines are those not uncovered in at least one
    report that knows them. Only the counts and uncovered lines are available after parsing,
    so a line counts as covered in a report when it is not in that report's uncovered list.
    """
    by_file: dict[str, list[FileCoverage]] = {}
    for report in reports:
        for key, cov in report.items():
            by_file.setdefault(key, []).append(cov)
    out: dict[str, FileCoverage] = {}
    for key, covs in by_file.items():
        uncovered = set.intersection(*(set(c.uncovered_lines) for c in covs))
        executable = max(c.executable_lines for c in covs)
        out[key] = FileCoverage(
            path=key,
            executable_lines=executable,
            covered_lines=executable - len(uncovered),
            uncovered_lines=sorted(uncovered),
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


def _finish(
    merged: dict[str, _Hits], repo: Path, bases: Iterable[Path], report: Path
) -> dict[str, FileCoverage]:
    """Relativise paths, drop outsiders, and turn hit maps into FileCoverage."""
    base_list = list(bases)
    out: dict[str, _Hits] = {}
    for file, hits in merged.items():
        key = _relativise(file, repo, base_list)
        if key is None:
            log.debug("%s: %s is outside %s; dropped", report, file, repo)
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
    )


def _relativise(file: str, repo: Path, bases: list[Path]) -> str | None:
    """Repository-relative POSIX path of `file`, or None when it lies outside the repository."""
    candidate = Path(file)
    if candidate.is_absolute():
        rel = _under(candidate, repo)
    else:
        # A relative name: the first base (inside the repo) where the file exists, else the
        # first base inside the repo at all.
        fulls = [(b if b.is_absolute() else repo / b) / candidate for b in bases]
        fulls = [f for f in fulls if _under(f.parent, repo) is not None]
        existing = [f for f in fulls if f.exists()]
        chosen = existing or fulls
        rel = _under(chosen[0], repo) if chosen else None
    if rel is None or not rel.parts or rel.parts[0] == "..":
        return None
    return rel.as_posix()


def _under(path: Path, repo: Path) -> PurePosixPath | None:
    """`path` relative to `repo` (also trying symlink-resolved forms), or None if outside."""
    norm = Path(os.path.normpath(path))
    for root in (Path(os.path.normpath(repo.absolute())), repo.resolve()):
        for p in (norm, Path(os.path.realpath(norm))):
            try:
                return PurePosixPath(*p.relative_to(root).parts)
            except ValueError:
                continue
    return None
