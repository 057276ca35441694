"""The numbered, marked source a generate or fix prompt shows."""

from __future__ import annotations

from tasks.core.types import FileCoverage
from tasks.generate.numbered import line_ranges, numbered, numbered_for

SOURCE = "def f(x):\n    if x:\n        return 1\n    return 2\n"


def test_every_line_has_its_number_and_marks_sit_on_the_missed_lines() -> None:
    assert numbered(SOURCE, uncovered=[3], partial=[2]) == (
        "   1 | def f(x):\n~> 2 |     if x:\n>> 3 |         return 1\n   4 |     return 2\n"
    )


def test_numbers_align_past_nine_lines_and_uncovered_wins_over_partial() -> None:
    text = "".join(f"line{n}\n" for n in range(1, 12))
    out = numbered(text, uncovered=[10], partial=[10, 11]).splitlines()
    assert out[0] == "    1 | line1"
    assert out[9] == ">> 10 | line10" and out[10] == "~> 11 | line11"


def test_line_numbers_out_of_range_and_empty_text_are_harmless() -> None:
    assert numbered("", uncovered=[1]) == ""
    assert numbered("a\n", uncovered=[5]) == "   1 | a\n"


def test_numbered_for_a_run_marks_its_coverage() -> None:
    cov = FileCoverage(
        path="f.py", executable_lines=4, covered_lines=3, uncovered_lines=[3], partial_lines=[2]
    )
    assert numbered_for(SOURCE, cov) == numbered(SOURCE, [3], [2])
    assert numbered_for(SOURCE, None) == numbered(SOURCE)


def test_a_pull_requests_changed_lines_get_a_column_of_their_own() -> None:
    text = "a = 1\nb = 2\nc = 3\n"
    assert numbered(text, uncovered=[2], changed=[2, 3]) == (
        "    1 | a = 1\n>>+ 2 | b = 2\n  + 3 | c = 3\n"
    )
    assert numbered(text, changed=[]) == numbered(text)  # a nightly target: as before


def test_changed_lines_read_as_ranges() -> None:
    assert line_ranges([7, 3, 4, 5, 12, 15, 16, 4]) == "3-5, 7, 12, 15-16"
    assert line_ranges([]) == ""
