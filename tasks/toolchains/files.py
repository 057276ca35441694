"""The file-rules interface a stack implements for one repository: which files are its sources
(and of which kind), its test files and their shared support, where tests live and where a new
one goes, and which test files the runner would never load. The mapping engine
(:mod:`tasks.toolchains.mapping`) and every part that must tell a test from production code ask it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

#: A match score of a test file for a source: (exact name?, length of the mirrored package
#: path, exact spelling?). Higher wins.
Score = tuple[int, int, int]


@dataclass
class SpecPlan:
    """Where the tests of one source may live, and where a new one goes.

    `exact` holds test file paths, `dirs` directory prefixes (``spec/models/user/``) whose test
    files belong to the source; each with the score of the match (see :data:`Score`).
    """

    source: str
    expected: str
    exact: dict[str, Score] = field(default_factory=dict)
    dirs: dict[str, Score] = field(default_factory=dict)


class FileRules(ABC):
    """A stack's rules for the files of one repository, read once from its configuration.

    The one place that decides what a test file is (:meth:`is_test_file`), what shared test
    support is, which files are sources and of which kind, and where a new test goes; the
    mapping engine (:mod:`tasks.toolchains.mapping`) assigns test files to sources with it.
    """

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    #: The directories tests live in, the first taking new ones (``spec``; pytest's testpaths).
    test_roots: list[str]

    def write_roots(self) -> list[str]:
        """The directories a generated file may be written under: the test roots; ``""``
        (anywhere, but only test files and support by :meth:`is_test_side`) for a stack whose
        tests live beside the code."""
        return list(self.test_roots)

    @abstractmethod
    def is_test_file(self, path: str) -> bool:
        """A file of examples that the test runner loads (as opposed to support)."""

    @abstractmethod
    def is_support_file(self, path: str) -> bool:
        """Shared test support other tests depend on (factories, spec/support, conftest.py)."""

    def is_test_side(self, path: str) -> bool:
        """A file of the test tree: a test file, support, or anything under a test root
        (also in a nested project, ``engines/x/spec/``); the rest is production code."""
        inside = f"/{PurePosixPath(path).parent.as_posix()}/"
        return (
            self.is_test_file(path)
            or self.is_support_file(path)
            or any(f"/{root}/" in inside for root in self.test_roots)
        )

    @abstractmethod
    def sources(self, files: list[str]) -> list[tuple[str, str]]:
        """The testable sources among `files`, with their kind, sorted by path."""

    @abstractmethod
    def plan(self, source: str) -> SpecPlan:
        """Where the tests of `source` may be, and the path of a new one."""

    def finish_plans(self, plans: list[SpecPlan], files: list[str]) -> None:
        """Settle the new test paths once every source is planned (in place)."""
        del plans, files

    def aliases(self, spec: str) -> list[str]:
        """Other spellings of a test file's path that the plans may name, tried in order when
        the path itself matches no source (none by default)."""
        del spec
        return []

    def claim(self, sources: list[str], specs: list[str], owners: dict[str, list[str]]) -> None:
        """Give test files no name rule matched to the sources they test (in place)."""
        del sources, specs, owners

    def warnings(self, files: list[str], specs: list[str]) -> list[str]:
        """Files that hold tests the runner will never load (a wrong name), one line each."""
        del files, specs
        return []
