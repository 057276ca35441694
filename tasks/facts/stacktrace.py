"""Source locations from stack traces, innermost frame last, relative to the repository.

Recognised frame forms (one per line, leading whitespace allowed):

- Ruby: ``path:12:in `meth'`` (also ``# ./spec/x_spec.rb:12:in ...`` as RSpec prints it,
  ``from path:12:in ...``, and Ruby 3.4's ``in 'Cls#meth'``). Ruby lists innermost first.
- pytest's location lines ``path:12: ErrorType`` (or ``path:12: in f`` / ``path:12:``),
  which also covers Ruby syntax errors (``x.rb:4: syntax error``) and Go's ``x_test.go:12: msg``.
  pytest lists innermost last.
- Python tracebacks ``File "path", line 12, in f``: innermost last.
- JVM ``at pkg.Cls.meth(Cls.java:12)`` (Java, Kotlin, Scala, Groovy; a Kotlin method named in
  backticks may hold spaces: ``at pkg.CartTest.scales by two(CartTest.kt:15)``; module and
  class-loader prefixes such as ``java.base@17/`` and ``app//`` are dropped): innermost first.
  The path is the package as directories plus the file name (``pkg/Cls.java``): the file
  name alone is ambiguous and the source root
  (``src/main/java``, ``src/test/kotlin``...) is not in the trace, so the repair flow resolves
  it against the repository's source roots.
- JavaScript ``at fn (path:12:3)`` and ``at path:12:3``: innermost first.

Consecutive frames of one orientation form a block; innermost-first blocks are reversed, so the
result is innermost last everywhere. Consecutive duplicate locations are dropped. Paths that are
not files (``<frozen ...>``, ``<internal:...>``, ``node:internal/...``) are skipped; absolute paths
outside the repository (gems, site-packages) are kept absolute: the caller filters them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic stays off the import path of report parsing (CLI start-up)
    from tasks.core.types import Location

# Anchored patterns applied to one stripped line each, chosen by a cheap prefix test first:
# traces are parsed for every failing case of reports with hundreds of thousands of cases, and
# one combined multi-line pattern backtracked badly.
_RUBY = re.compile(r"(?:#\s*)?(?:from\s+)?([^\s:#][^:]*?):(\d+):in\b")
_PYTHON = re.compile(r'File "([^"]+)", line (\d+)')
# JVM frames: the method may hold anything but the file's parenthesis (Kotlin's backticked
# `scales by two`, Scala's $anonfun$, lambda$0); the class may carry a module or class-loader
# prefix (java.base@17/, app//).
_JAVA = re.compile(r"at (\S.*)\(([^():]+):(\d+)\)$")
_JS = re.compile(r"at (?:[^()]*\()?([^\s()]+):(\d+):\d+\)?$")
_SHORT = re.compile(r"([^\s:\"']+):(\d+):(?:\s|$)")


def _frame(line: str) -> tuple[str, str, bool] | None:
    """(path, line number, innermost first) for one trace line, or None."""
    if line.startswith("at "):
        m = _JAVA.match(line)
        if m:
            return _java_path(m.group(1), m.group(2)), m.group(3), True
        if not line[-1].isdigit() and not line[-2:-1].isdigit():
            return None  # "(Native Method)", "(Unknown Source)", "(<anonymous>)"
        m = _JS.match(line)
        return (m.group(1), m.group(2), True) if m else None
    if line.startswith('File "'):
        m = _PYTHON.match(line)
        return (m.group(1), m.group(2), False) if m else None
    if ":in " in line or ":in`" in line:
        m = _RUBY.match(line)
        if m:
            return m.group(1), m.group(2), True
    m = _SHORT.match(line)
    # Only something that looks like a file name (has an extension): not "Error: 3:".
    if m and "." in m.group(1).rsplit("/", 1)[-1]:
        return m.group(1), m.group(2), False
    return None


def _not_a_file(path: str) -> bool:
    return path.startswith(("<", "node:", "internal/")) or path in ("native", "unknown")


@lru_cache(maxsize=4096)
def _java_path(frame: str, file_name: str) -> str:
    # Drop a module prefix (java.base/java.lang.Thread.run), then the method and the class.
    # A Kotlin method name may contain spaces (and arrive in backticks), never dots.
    qualified = frame.rsplit("/", 1)[-1].replace("`", "")
    package = qualified.split(".")[:-2]
    return "/".join([*package, file_name]) if package else file_name


class PathNormaliser:
    """Makes report and trace paths repository-relative when they fall inside the repository.

    ``./x`` becomes ``x``; ``file://`` URLs become paths; absolute paths under the repository
    (as given or with symlinks resolved) become relative; everything else is left as it is.
    Results are memoised because the same few paths recur in every trace of a report.
    """

    def __init__(self, repo: Path | None) -> None:
        """Resolve the repository root once (no other filesystem access happens later)."""
        roots: list[str] = []
        if repo is not None:
            for root in (os.path.abspath(repo), os.path.realpath(repo)):
                if root not in roots:
                    roots.append(root)
        self._roots = roots
        self._cached: Callable[[str], str] = lru_cache(maxsize=4096)(self._normalise)
        #: Parsed trace lines: the same frames recur in thousands of traces of one report.
        self.frames: dict[str, tuple[tuple[str, int], bool] | None] = {}

    def __call__(self, path: str) -> str:
        """Return the normalised form of ``path``."""
        return self._cached(path)

    def _normalise(self, path: str) -> str:
        if path.startswith("file://"):
            path = path[len("file://") :]
        if os.path.isabs(path):
            path = os.path.normpath(path)
            for root in self._roots:
                if path.startswith(root + os.sep):
                    return path[len(root) + 1 :]
                if path == root:
                    return "."
            return path
        while path.startswith("./"):
            path = path[2:]
        return path


_MISSING: Any = object()
_FRAME_CACHE = 65536


def _parse_line(raw: str, norm: PathNormaliser) -> tuple[tuple[str, int], bool] | None:
    found = _frame(raw.strip())
    if found is None:
        return None
    path, line, innermost_first = found
    number = int(line)
    if number < 1 or _not_a_file(path):
        return None
    return (norm(path), number), innermost_first


def trace_pairs(trace: str, norm: PathNormaliser) -> list[tuple[str, int]]:
    """(path, line) pairs of a trace, innermost last, without consecutive duplicates.

    The plain-tuple form of :func:`locations_from_trace` for bulk callers (report parsing),
    which let pydantic build the Location objects in one validation per case.
    """
    ordered: list[tuple[str, int]] = []
    block: list[tuple[str, int]] = []
    block_reversed = False
    frames = norm.frames
    for raw in trace.splitlines():
        found = frames.get(raw, _MISSING)
        if found is _MISSING:
            found = _parse_line(raw, norm)
            if len(frames) >= _FRAME_CACHE:
                frames.clear()
            frames[raw] = found
        if found is None:
            continue
        pair, innermost_first = found
        if innermost_first != block_reversed and block:
            ordered.extend(reversed(block) if block_reversed else block)
            block = []
        block_reversed = innermost_first
        block.append(pair)
    if not ordered:  # one block, the usual trace
        ordered = block
        if block_reversed:
            ordered.reverse()
    else:
        ordered.extend(reversed(block) if block_reversed else block)
    result = ordered[:1]
    for pair in ordered:
        if pair != result[-1]:
            result.append(pair)
    return result


def locations_from_trace(
    trace: str, repo: Path | None, normalise: PathNormaliser | None = None
) -> list[Location]:
    """Parse the source locations of a stack trace, innermost last.

    Args:
        trace: The trace text in any of the forms the module docstring lists (mixed is fine).
        repo: The repository root; locations inside it become relative to it.
        normalise: A shared normaliser (saves resolving ``repo`` again for every trace).

    Returns:
        The locations, innermost last, without consecutive duplicates.
    """
    from tasks.core.types import Location

    norm = normalise if normalise is not None else PathNormaliser(repo)
    return [Location(path=p, line=n) for p, n in trace_pairs(trace, norm)]
