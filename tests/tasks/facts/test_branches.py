"""Branch coverage read from coverage.py and SimpleCov entries, hostile ones included."""

from __future__ import annotations

from tasks.core.types import FileCoverage
from tasks.facts.branches import (
    merge_simplecov_branches,
    with_coverage_py_branches,
    with_simplecov_branches,
)

COV = FileCoverage(path="a.rb", executable_lines=6, covered_lines=5, uncovered_lines=[9])


def test_simplecov_branches_merge_by_the_most_hits_and_name_partial_lines() -> None:
    taken: dict[tuple[int, str], int] = {}
    first = {"[:if, 0, 4, 4, 6, 7]": {"[:then, 1, 5, 6, 5, 9]": 0, "[:else, 2, 4, 4, 6, 7]": 2}}
    second = {"[:if, 0, 4, 4, 6, 7]": {"[:then, 1, 5, 6, 5, 9]": 0, "[:else, 2, 4, 4, 6, 7]": 0}}
    merge_simplecov_branches(taken, first)
    merge_simplecov_branches(taken, second)
    out = with_simplecov_branches(COV, taken)
    assert (out.branches, out.covered_branches, out.partial_lines) == (2, 1, [4])


def test_hostile_simplecov_entries_are_skipped_not_fatal() -> None:
    taken: dict[tuple[int, str], int] = {}
    merge_simplecov_branches(
        taken,
        {
            "[:if]": {"[:then]": 1},  # no line
            "[:if, 0, x, 1]": {"[:then]": 1},  # line not a number
            "[:if, 0, 3, 1]": "not a mapping",
            "[:case, 0, 7, 1]": {"[:when]": True, "[:else]": -1, "[:in]": "2"},
        },
    )
    assert taken == {}
    # An uncovered line is not "partial": it is missed whole.
    merge_simplecov_branches(taken, {"[:if, 0, 9, 1]": {"[:then]": 0}})
    assert with_simplecov_branches(COV, taken).partial_lines == []


def test_coverage_py_branch_entry_and_a_bad_one() -> None:
    entry = {"summary": {"num_branches": 4, "covered_branches": 3}, "missing_branches": [[4, 6]]}
    out = with_coverage_py_branches(COV, entry)
    assert (out.branches, out.covered_branches, out.partial_lines) == (4, 3, [4])
    assert with_coverage_py_branches(COV, {"summary": "x", "missing_branches": 3}) == COV
