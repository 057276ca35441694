"""Which files of a JavaScript/TypeScript project are sources and tests, how they map, and
the kind of each source (pure functions over paths and file texts; nothing runs).

Rules (tests/test_node_layout.py exercises each one):

Code files
    ``.js .jsx .ts .tsx .mjs .cjs`` (also ``.mts .cts``); never ``*.d.ts`` declarations.
Tests
    What Jest's default ``testMatch`` finds: ``*.test.<ext>`` and ``*.spec.<ext>`` anywhere,
    and every code file under a ``__tests__/`` directory. Helpers under ``__mocks__/``,
    ``__fixtures__/`` and test roots (``test/``, ``tests/``, ``spec/``...) that are not tests
    are neither tests nor sources.
Sources
    Code files that are not tests, outside the directories no one tests (``node_modules/``,
    ``dist/``, ``build/``, ``coverage/``, ``out/``, ``public/``, ``vendor/``, ``docs/``,
    ``scripts/``, ``examples/``, storybook and tool caches) and not tool configuration
    (``jest.config.*``, ``*.config.<ext>``, ``*.setup.<ext>``, ``.eslintrc.js``...). When a
    top-level ``src/`` holds code, only ``src/`` is searched (the rest is build glue).
Mapping
    ``src/a/foo.ts`` is tested by a test named ``foo`` (``foo.test.ts``, ``foo.spec.js``,
    ``__tests__/foo.ts``...; any code extension) that lies beside it, in a ``__tests__/``
    directory beside it, or under a test root (``test/``, ``tests/``, ``__tests__/``,
    ``spec/``) at the mirrored path (``test/a/foo.spec.js``) or at the root's top
    (``test/foo.spec.js``). ``index`` files are also tested by a test named after their
    directory (``src/orders/index.ts`` <- ``src/orders.test.ts``, ``test/orders.spec.ts``).
    A test that no source claims by name (one named after a feature) tests the sources it
    imports directly (:mod:`tasks.toolchains.node.imports`).
New tests
    Follow the project's majority convention (beside the source, in ``__tests__/``, or under a
    test root; ``.test`` or ``.spec``), colocated ``.test`` when there is none; the test's
    extension follows the source's (``.ts`` -> ``.test.ts``, ``.jsx`` -> ``.test.jsx``).
Kinds
    ``component`` (a ``.jsx``/``.tsx`` file that exports a capitalised component or holds JSX,
    or any file under a ``components/`` directory: React-free components render DOM nodes),
    ``route`` (Express/Fastify handlers: under ``routes/``, ``handlers/``, ``controllers/``,
    ``api/``, named ``server``/``app``/``router``/``routes``, or code that registers routes or
    takes ``(req, res)``), ``utility`` (under
    ``utils/``, ``util/``, ``helpers/``, ``lib/utils``, or named ``*util*``/``*helper*``), else
    ``module``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath

from tasks.toolchains.node.imports import imported_sources

#: Every extension the stack treats as code.
CODE_EXTENSIONS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")
#: Directories (at any depth) that hold no source to test.
SKIPPED_DIRS = frozenset(
    {
        "node_modules",
        "dist",
        "build",
        "coverage",
        "out",
        "public",
        "vendor",
        "docs",
        "scripts",
        "examples",
        ".git",
        ".next",
        ".nuxt",
        ".storybook",
        ".cache",
        ".turbo",
        ".autopilot-tmp",
        "storybook-static",
        "__mocks__",
        "__fixtures__",
        "__snapshots__",
        "fixtures",
    }
)
#: Directories whose code files are test support, never sources.
TEST_ROOTS = ("test", "tests", "__tests__", "spec", "e2e", "cypress")
_TEST_NAME = re.compile(r"^(?P<stem>.+)\.(?P<suffix>test|spec)\.(?:[cm]?[jt]sx?)$")
_CONFIG_NAME = re.compile(
    r"^(?:\.?[\w-]+\.(?:config|setup|conf)|\.eslintrc|\.prettierrc|\.babelrc|gulpfile|"
    r"gruntfile|jest\.[\w-]+|setupTests|jest-setup)\.(?:[cm]?[jt]sx?)$",
    re.IGNORECASE,
)


class NodeKind(StrEnum):
    """How a JavaScript/TypeScript source is tested; one skill per kind."""

    MODULE = "node-module"
    COMPONENT = "node-component"
    ROUTE = "node-route"
    UTILITY = "node-utility"


@dataclass
class NodeMapped:
    """One source, the tests that cover it, and where a new test would go."""

    source: str
    kind: NodeKind
    tests: list[str] = field(default_factory=list)
    expected_test: str = ""


@dataclass
class NodeMapping:
    """The mapping of one project: every source, the untested ones, and every test file."""

    files: list[NodeMapped]
    tests: list[str]
    untested: list[str]
    warnings: list[str] = field(default_factory=list)


def is_code(path: str) -> bool:
    """A JavaScript/TypeScript code file (declaration files ``*.d.ts`` are not code)."""
    name = PurePosixPath(path).name
    return name.endswith(CODE_EXTENSIONS) and not re.search(r"\.d\.[cm]?ts$", name)


def _skipped(path: str) -> bool:
    return any(part in SKIPPED_DIRS for part in PurePosixPath(path).parts[:-1])


def is_test_file(path: str) -> bool:
    """A file Jest runs by its default ``testMatch``: ``*.test.*``/``*.spec.*`` or any code
    file under ``__tests__/`` (outside node_modules and the other skipped directories)."""
    if not is_code(path) or _skipped(path):
        return False
    parts = PurePosixPath(path).parts
    return _TEST_NAME.match(parts[-1]) is not None or "__tests__" in parts[:-1]


def is_config_file(path: str) -> bool:
    """Tool configuration written in JavaScript (``jest.config.ts``, ``vite.config.mjs``...)."""
    return _CONFIG_NAME.match(PurePosixPath(path).name) is not None


def is_source_file(path: str, *, src_layout: bool = False) -> bool:
    """A code file to test: not a test, not support code under a test root, not tool
    configuration, not in a skipped directory; only under ``src/`` when `src_layout`."""
    if not is_code(path) or _skipped(path) or is_test_file(path) or is_config_file(path):
        return False
    parts = PurePosixPath(path).parts
    if any(part in TEST_ROOTS for part in parts[:-1]):
        return False
    return not src_layout or (len(parts) > 1 and parts[0] == "src")


def stem_of_test(path: str) -> str:
    """The name a test file tests: ``foo`` for ``foo.test.ts``, ``__tests__/foo.tsx``."""
    name = PurePosixPath(path).name
    m = _TEST_NAME.match(name)
    if m:
        return m.group("stem")
    return _stem(name)


def _stem(name: str) -> str:
    """A file name without its extension (``money.util`` for ``money.util.ts``)."""
    return name.rsplit(".", 1)[0] if "." in name else name


def source_stems(source: str) -> list[str]:
    """The names a test of `source` may carry: its stem, and for an ``index`` file the
    directory's name too."""
    p = PurePosixPath(source)
    stem = _stem(p.name)
    if stem == "index" and len(p.parts) > 1:
        return [stem, p.parent.name]
    return [stem]


def _strip_src(parts: tuple[str, ...]) -> tuple[str, ...]:
    return parts[1:] if parts and parts[0] in ("src", "lib", "app") else parts


def _places(source: str, stem: str) -> set[str]:
    """Directories where a test named `stem` of `source` may lie."""
    p = PurePosixPath(source)
    directory = p.parent
    if stem != _stem(p.name):  # index file tested by its directory's name
        directory = directory.parent
    sub = _strip_src(directory.parts)
    places = {directory.as_posix(), (directory / "__tests__").as_posix()}
    for root in TEST_ROOTS:
        places.add(root)
        places.add(PurePosixPath(root, *sub).as_posix() if sub else root)
        if directory.parts and directory.parts[0] in ("src", "lib", "app"):
            places.add(PurePosixPath(root, *directory.parts).as_posix())
    return {"" if d == "." else d for d in places}


def find_tests(source: str, tests: Iterable[str]) -> list[str]:
    """The test files among `tests` that test `source` (see the module docstring)."""
    found: list[str] = []
    for stem in source_stems(source):
        places = _places(source, stem)
        for test in tests:
            parent = PurePosixPath(test).parent.as_posix()
            if stem_of_test(test) == stem and ("" if parent == "." else parent) in places:
                found.append(test)
    return sorted(dict.fromkeys(found))


@dataclass(frozen=True)
class Convention:
    """Where a project keeps its tests: ``beside`` the source, in ``dunder`` (``__tests__``
    beside it) or under a test ``root``; and the name suffix (``test`` or ``spec``)."""

    place: str = "beside"
    suffix: str = "test"
    root: str = "test"


def project_convention(tests: Iterable[str]) -> Convention:
    """The project's majority convention (ties: beside, then ``.test``)."""
    places: Counter[str] = Counter()
    suffixes: Counter[str] = Counter()
    roots: Counter[str] = Counter()
    for test in tests:
        parts = PurePosixPath(test).parts
        if parts[0] in TEST_ROOTS and len(parts) > 1:
            places["root"] += 1
            roots[parts[0]] += 1
        elif "__tests__" in parts[:-1]:
            places["dunder"] += 1
        else:
            places["beside"] += 1
        m = _TEST_NAME.match(parts[-1])
        suffixes[m.group("suffix") if m else "test"] += 1
    order = ["beside", "dunder", "root"]
    place = max(order, key=lambda k: (places[k], -order.index(k)))
    suffix = "spec" if suffixes["spec"] > suffixes["test"] else "test"
    root = roots.most_common(1)[0][0] if roots else "test"
    return Convention(place=place, suffix=suffix, root=root)


def expected_test(source: str, convention: Convention) -> str:
    """Where a new test of `source` goes under `convention`."""
    p = PurePosixPath(source)
    name = f"{_stem(p.name)}.{convention.suffix}{p.suffix}"
    if convention.place == "dunder":
        return (p.parent / "__tests__" / name).as_posix()
    if convention.place == "root":
        return PurePosixPath(convention.root, *_strip_src(p.parent.parts), name).as_posix()
    return (p.parent / name).as_posix()


_COMPONENT_DIRS = frozenset({"components", "component", "widgets", "views", "pages", "ui"})
_ROUTE_DIRS = frozenset({"routes", "route", "handlers", "controllers", "api", "endpoints"})
_UTILITY_DIRS = frozenset({"utils", "util", "helpers", "helper", "utilities"})
_EXPORTS_COMPONENT = re.compile(
    r"export\s+(?:default\s+)?(?:function|class|const)\s+[A-Z]\w*|export\s+default\s+[A-Z]\w*"
)
_JSX = re.compile(r"<[A-Z][\w.]*[\s/>]|</[a-z]+>|React\.createElement\(")
_ROUTE_CODE = re.compile(
    r"\bexpress\.Router\(\)|\bRouter\(\)|\bfastify\.(?:get|post|put|patch|delete|route)\(|"
    r"\b(?:app|router|server)\.(?:get|post|put|patch|delete|use|route)\(\s*['\"`/]|"
    r"\(\s*req\b[^)]*,\s*(?:res|reply)\b"
)
_ROUTE_NAMES = frozenset({"server", "app", "router", "routes"})


def source_kind(path: str, text: str = "") -> NodeKind:
    """The kind of a source (see the module docstring); `text` is its content, if read."""
    p = PurePosixPath(path)
    dirs = {part.lower() for part in p.parts[:-1]}
    name = p.name.lower()
    if p.suffix in (".jsx", ".tsx") and (_EXPORTS_COMPONENT.search(text) or _JSX.search(text)):
        return NodeKind.COMPONENT
    if dirs & _COMPONENT_DIRS:
        return NodeKind.COMPONENT
    if dirs & _ROUTE_DIRS or _stem(name) in _ROUTE_NAMES or _ROUTE_CODE.search(text):
        return NodeKind.ROUTE
    if dirs & _UTILITY_DIRS or re.search(r"utils?\b|helpers?\b", _stem(name)):
        return NodeKind.UTILITY
    return NodeKind.MODULE


def map_files(files: Iterable[str], read: Callable[[str], str | None] | None = None) -> NodeMapping:
    """Map a project's files (repository-relative paths) to sources, kinds and tests.

    Args:
        files: every file of the project (e.g. from ``git ls-files``).
        read: returns a file's text (for kinds; None or an OSError when it has none); None
            decides kinds by location only.
    """
    files = sorted(dict.fromkeys(files))
    src_layout = any(f.startswith("src/") and is_source_file(f) for f in files)
    sources = [f for f in files if is_source_file(f, src_layout=src_layout)]
    tests = [f for f in files if is_test_file(f)]
    convention = project_convention(tests)
    owners = {s: find_tests(s, tests) for s in sources}
    claimed = {t for ts in owners.values() for t in ts}
    for test in tests:
        if test in claimed:
            continue
        for source in imported_sources(test, _safe_read(read, test), sources):
            owners[source].append(test)
            claimed.add(test)
    warnings = [
        f"{t}: a test file no source matches by name or import (its tests still run with the suite)"
        for t in tests
        if t not in claimed
    ]
    mapped = [
        NodeMapped(
            source=s,
            kind=source_kind(s, _safe_read(read, s)),
            tests=owners[s],
            expected_test=expected_test(s, convention),
        )
        for s in sources
    ]
    return NodeMapping(
        files=mapped,
        tests=tests,
        untested=[m.source for m in mapped if not m.tests],
        warnings=warnings,
    )


def _safe_read(read: Callable[[str], str | None] | None, path: str) -> str:
    if read is None:
        return ""
    try:
        return read(path) or ""
    except (OSError, UnicodeDecodeError):
        return ""
