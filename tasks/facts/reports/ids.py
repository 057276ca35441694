"""Case ids: built from everything a report says about a case, and unique within a run.

A JUnit case's base id joins what is known, in this order: ``file`` (with ``:line`` when the
report gives one), the class, the name, separated by ``::``::

    tests/test_cart.py:12::TestCart::test_total[2]   pytest xunit1 (file, line, class, name)
    spec/models/user_spec.rb::User validates name    rspec_junit_formatter (file, name)
    com.example.shop.CartTest::totalIncludesTax      Surefire, Gradle, Ant, go-junit-report

The class is left out where it only repeats the file (``tests.test_cart`` for
``tests/test_cart.py``, rspec_junit_formatter's ``spec.models.user_spec``) or the name
(jest-junit's default), and reduced to what the file does not say (pytest's
``tests.test_cart.TestCart`` becomes ``TestCart``). A case with neither name nor class takes its
suite's name as class. RSpec JSON cases keep RSpec's own example id.

Two cases can still share everything (two reports of one run, an example defined twice):
:class:`CaseIds` then gives the later ones ``#2``, ``#3``... and records which id they repeat,
so later steps that key on ids (grouping, repair, diffing runs) never merge different cases.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)
def _module(file: str) -> str:
    """``tests/test_cart.py`` -> ``tests.test_cart``: how runners spell a file as a class."""
    stem = file
    dot = stem.rfind(".")
    if dot > stem.rfind("/"):
        stem = stem[:dot]
    return stem.replace("/", ".")


def _class_part(classname: str, name: str, file: str) -> str:
    if not classname or classname == name:
        return ""
    module = _module(file)
    if classname == module:
        return ""
    if classname.startswith(module) and classname[len(module) : len(module) + 1] == ".":
        return classname[len(module) + 1 :]
    return classname


def base_id(file: str | None, line: int | None, classname: str, name: str, suite: str) -> str:
    """The id of a JUnit case before duplicates are numbered (see the module docstring)."""
    if file is None:
        if classname and classname != name:
            return f"{classname}::{name}"  # Surefire, Gradle, Ant, go-junit-report, xunit2
        return f"{suite}::{name}" if not name and not classname else f"::{name}"
    cls = _class_part(classname, name, file)
    where = file if line is None else f"{file}:{line}"
    if cls:
        return f"{where}::{cls}::{name}"
    return f"{where}::{name}"


class CaseIds:
    """Makes case ids unique across the reports of one run.

    Ids claimed while a report is read are pending until :meth:`commit` (the report parsed) or
    :meth:`rollback` (it failed: its cases are dropped, so their ids are free again).

    Memory: the ids themselves are not kept, only their 64-bit hashes (``hash()``, keyed per
    process), ~75 bytes per case where a set of the ids took ~110 and kept every id string
    alive. Two different ids with the same hash would make the later one a false duplicate;
    with n cases the chance is about n**2 / 2**65 (3e-8 for a million cases).
    """

    def __init__(self) -> None:
        """Start with no ids taken."""
        self._taken: set[int] = set()
        self._pending: set[int] = set()
        self._next: dict[str, int] = {}  # next number to try for an id that repeated
        self._next_taken: dict[str, int] = {}

    def _add(self, h: int) -> bool:
        """Add hash ``h`` unless taken; True when added."""
        if h in self._taken or h in self._pending:
            return False
        self._pending.add(h)
        return True

    def claim(self, base: str) -> tuple[str, str | None]:
        """Return (unique id, the id it duplicates or None) for a case whose id is ``base``."""
        if self._add(hash(base)):
            return base, None
        n = self._next.get(base, 2)
        while not self._add(hash(candidate := f"{base}#{n}")):
            n += 1
        self._next[base] = n + 1
        return candidate, base

    def claim_new(self, ids: list[str]) -> bool:
        """Claim every id of ``ids`` when all are new (none taken, none repeated), in one step.

        Returns False, having claimed nothing, when any is not new: then :meth:`claim` them
        one by one.
        """
        new = set(map(hash, ids))
        if (
            len(new) == len(ids)
            and new.isdisjoint(self._pending)
            and (not self._taken or new.isdisjoint(self._taken))
        ):
            self._pending |= new
            return True
        return False

    def commit(self) -> None:
        """Keep the ids of the report just read."""
        if self._taken:
            self._taken |= self._pending
        else:
            self._taken = self._pending  # the usual case, one report: no copy
        self._pending = set()
        self._next_taken = dict(self._next)

    def rollback(self) -> None:
        """Forget the ids of a report that failed."""
        self._pending = set()
        self._next = dict(self._next_taken)
