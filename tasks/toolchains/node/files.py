"""node-jest's :class:`~tasks.toolchains.files.FileRules`: the rules of
:mod:`tasks.toolchains.node.layout` (tests by Jest's default ``testMatch``: colocated
``*.test.ts``, ``__tests__/``, ``test/*.spec.js``; support: Jest setup files, ``__mocks__/``,
``__fixtures__/``, snapshots and helpers under test roots; sources with their kinds; the new
test's path by the project's majority convention) asked through the interface.

The mapping engine plans each source; :meth:`NodeFileRules.finish_plans` maps the whole project
once with the layout's rules (names, places, and imports for tests named after a feature) and
gives every plan its tests as exact matches and its new test's path.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path, PurePosixPath

from tasks.toolchains.files import FileRules, SpecPlan
from tasks.toolchains.node.layout import (
    TEST_ROOTS,
    NodeMapping,
    is_code,
    is_source_file,
    is_test_file,
    map_files,
    source_kind,
)

#: Jest setup and support files by name (``setupFilesAfterEach`` and friends).
SETUP_GLOBS = ("jest.setup.*", "jest-setup.*", "setupTests.*", "test-setup.*", "testSetup.*")
#: Directories whose files are test support wherever they are.
SUPPORT_DIRS = frozenset({"__mocks__", "__fixtures__", "__snapshots__"})
#: A matched test: an exact name rule (the layout already chose the best place).
_MATCH = (1, 0, 1)


def read_text(path: Path, limit: int = 1_000_000) -> str | None:
    """A file's text, or None when it is missing, too large or not UTF-8."""
    try:
        if path.stat().st_size > limit:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class NodeFileRules(FileRules):
    """Jest's files in a JavaScript/TypeScript project."""

    def __init__(self, repo: Path) -> None:
        super().__init__(repo)
        self.test_roots = list(TEST_ROOTS)
        self._mapping: NodeMapping | None = None

    def write_roots(self) -> list[str]:
        # Jest's tests live beside the code: any place, for test and support files only.
        return [""]

    def is_test_file(self, path: str) -> bool:
        return is_test_file(path)

    def is_support_file(self, path: str) -> bool:
        p = PurePosixPath(path)
        if is_test_file(path):
            return False
        if any(fnmatch.fnmatchcase(p.name, glob) for glob in SETUP_GLOBS):
            return True
        if SUPPORT_DIRS.intersection(p.parts[:-1]):
            return True
        return is_code(path) and len(p.parts) > 1 and p.parts[0] in TEST_ROOTS

    def is_test_side(self, path: str) -> bool:
        # Only a test root at the top is the test tree: ``src/api/spec/`` is not a root.
        parts = PurePosixPath(path).parts
        top = len(parts) > 1 and parts[0] in TEST_ROOTS
        return self.is_test_file(path) or self.is_support_file(path) or top

    def sources(self, files: list[str]) -> list[tuple[str, str]]:
        src_layout = any(f.startswith("src/") and is_source_file(f) for f in files)
        chosen = [f for f in files if is_source_file(f, src_layout=src_layout)]
        return sorted((f, str(source_kind(f, read_text(self.repo / f) or ""))) for f in chosen)

    def plan(self, source: str) -> SpecPlan:
        return SpecPlan(source=source, expected="")

    def mapping(self, files: list[str]) -> NodeMapping:
        """The layout's mapping of the project (computed once per rules object)."""
        if self._mapping is None:
            self._mapping = map_files(files, lambda rel: read_text(self.repo / rel))
        return self._mapping

    def finish_plans(self, plans: list[SpecPlan], files: list[str]) -> None:
        mapped = {m.source: m for m in self.mapping(files).files}
        for plan in plans:
            found = mapped.get(plan.source)
            if found is None:
                continue
            plan.expected = found.expected_test
            for test in found.tests:
                plan.exact[test] = _MATCH

    def warnings(self, files: list[str], specs: list[str]) -> list[str]:
        del specs
        return list(self.mapping(files).warnings)
