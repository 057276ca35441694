"""Source locations from stack traces, innermost frame last, relative to the repository.

Recognised frame forms (one per line, leading whitespace allowed):

- Ruby: ``path:12:in `meth'`` (also ``# ./spec/x_spec.rb:12:in ...`` as RSpec prints it,
  ``from path:12:in ...``, and Ruby 3.4's ``in 'Cls#meth'``). Ruby lists innermost first.
- pytest's location lines ``path:12: ErrorType`` (or ``path:12: in f`` / ``path:12:``),
  which also covers Ruby syntax errors (``x.rb:4: syntax error``) and Go's ``x_test.go:12: msg``.
  pytest lists innermost last.
- Python tracebacks ``File "path", line 12, in f``: innermost last.
- Java ``at pkg.Cls.meth(Cls.java:12)``: innermost first. The path is the package as directories
  plus the file name (``pkg/Cls.java``): the file name alone is ambiguous and the source root
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

from tasks.types import Location

# One scan over the whole trace (re.M) instead of a Python loop per line: traces are parsed for
# every failing case of reports with hundreds of thousands of cases.
_FRAME = re.compile(
    r"""^[ \t]*(?:
        (?:\#[ \t]*)?(?:from[ \t]+)?(?P<rb_path>[^\s:\#][^:\n]*?):(?P<rb_line>\d+):in\b
      | File[ \t]"(?P<py_path>[^"\n]+)",[ \t]line[ \t](?P<py_line>\d+)
      | at[ \t](?P<jv_frame>[\w$.<>/]+?)\((?P<jv_file>[^():\n]+):(?P<jv_line>\d+)\)
      | at[ \t](?:[^\n(]*?[ \t]\()?(?P<js_path>[^\s()]+?):(?P<js_line>\d+):\d+\)?[ \t]*$
      | (?P<pt_path>[^\s:"'][^:\s"']*\.\w+):(?P<pt_line>\d+):(?=[ \t]|$)
    )""",
    re.M | re.X,
)


def _not_a_file(path: str) -> bool:
    return path.startswith(("<", "node:", "internal/")) or path in ("native", "unknown")


def _java_path(frame: str, file_name: str) -> str:
    # Drop a module prefix (java.base/java.lang.Thread.run), then the method and the class.
    qualified = frame.rsplit("/", 1)[-1]
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
    norm = normalise if normalise is not None else PathNormaliser(repo)
    ordered: list[tuple[str, int]] = []
    block: list[tuple[str, int]] = []
    block_reversed = False
    for m in _FRAME.finditer(trace):
        if m.group("rb_path") is not None:
            path, line, innermost_first = m.group("rb_path"), m.group("rb_line"), True
        elif m.group("py_path") is not None:
            path, line, innermost_first = m.group("py_path"), m.group("py_line"), False
        elif m.group("jv_frame") is not None:
            path = _java_path(m.group("jv_frame"), m.group("jv_file"))
            line, innermost_first = m.group("jv_line"), True
        elif m.group("js_path") is not None:
            path, line, innermost_first = m.group("js_path"), m.group("js_line"), True
        else:
            path, line, innermost_first = m.group("pt_path"), m.group("pt_line"), False
        number = int(line)
        if number < 1 or _not_a_file(path):
            continue
        if block and innermost_first != block_reversed:
            ordered.extend(reversed(block) if block_reversed else block)
            block = []
        block_reversed = innermost_first
        block.append((norm(path), number))
    ordered.extend(reversed(block) if block_reversed else block)

    result: list[Location] = []
    previous: tuple[str, int] | None = None
    for item in ordered:
        if item != previous:
            result.append(Location(path=item[0], line=item[1]))
            previous = item
    return result
