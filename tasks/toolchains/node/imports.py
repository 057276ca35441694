"""Which sources a test file imports directly (relative ``import``/``require``/``import()``),
so tests named after a feature rather than a file (``test/functional/circular-reference.spec.ts``)
still map to the code they exercise.

Resolution follows Node and TypeScript: the specifier as written, with each code extension
appended, a ``.js`` written for a ``.ts`` file (ES module TypeScript), and a directory's
``index`` file. Imports of packages (no leading ``.``) are not sources of the project.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

#: Extensions tried for an import written without one, in TypeScript's order.
EXTENSIONS = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_SPECIFIERS = re.compile(
    r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*|\bjest\.requireActual\s*\(\s*)"""
    r"""['"](?P<spec>\.{1,2}(?:/[^'"\n]*)?)['"]"""
)


def relative_imports(text: str) -> list[str]:
    """The relative module specifiers a file imports, in order, without repeats."""
    return list(dict.fromkeys(m.group("spec") for m in _SPECIFIERS.finditer(text)))


def resolve(importer: str, spec: str, files: set[str]) -> str | None:
    """The repository file `spec` (imported by `importer`) names, or None."""
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    if base.startswith("../") or base == "..":
        return None
    stem = base
    for written in (".js", ".jsx", ".mjs", ".cjs"):
        if base.endswith(written):
            stem = base[: -len(written)]
            break
    candidates = [base, *(stem + ext for ext in EXTENSIONS)]
    candidates += [f"{base}/index{ext}" for ext in EXTENSIONS]
    return next((c for c in candidates if c in files), None)


def imported_sources(test: str, text: str, sources: Iterable[str]) -> list[str]:
    """The sources among `sources` that `test` (whose content is `text`) imports directly."""
    known = set(sources)
    found = (resolve(test, spec, known) for spec in relative_imports(text))
    return sorted({f for f in found if f is not None})
