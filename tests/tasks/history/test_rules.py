"""The rules memory applies, on the records the store gives back: the flaky quarantine (N runs,
the window, one commit), the nightly's skips (a streak at one gate, unchanged key, K nights),
and the merge of several reports' cases into one result per test."""

from __future__ import annotations

import datetime as dt

from tasks.core.types import TestCaseResult
from tasks.history.records import SeenResult, SeenVerdict, case_key
from tasks.history.rules import merge_cases, quarantined, skip_of

NOW = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
WEEK_AGO = NOW - dt.timedelta(days=7)


def seen(run: str, status: str, commit: str = "c1", days_ago: float = 0) -> SeenResult:
    return SeenResult(
        test_key="tests/t.py::a",
        test_id="tests/t.py:3::a",
        status=status,
        source="ci-report",
        run_id=run,
        commit=commit,
        observed_at=NOW - dt.timedelta(days=days_ago),
    )


def test_a_flip_at_one_commit_within_the_last_runs_quarantines_with_the_evidence() -> None:
    results = [seen("r3", "failed", days_ago=0), seen("r2", "passed", days_ago=1)]

    found = quarantined(results, runs=10, since=WEEK_AGO)

    assert found is not None and found.commit == "c1"
    assert [(e.run_id, e.status) for e in found.evidence] == [("r2", "passed"), ("r3", "failed")]
    assert found.line().startswith("flipped at commit c1: passed in run r2 (ci-report, ")


def test_different_commits_an_old_flip_or_one_past_n_runs_is_no_quarantine() -> None:
    # A pass then a failure at another commit: a regression, not a flake.
    assert (
        quarantined([seen("r2", "failed", "c2"), seen("r1", "passed", "c1")], 10, WEEK_AGO) is None
    )
    # The flip is older than the window.
    old = [seen("r2", "failed", days_ago=9), seen("r1", "passed", days_ago=10)]
    assert quarantined(old, 10, WEEK_AGO) is None
    # The flip is past the test's last 2 runs: it passes steadily since.
    steady = [seen("r4", "passed", days_ago=0), seen("r3", "passed", days_ago=1)]
    flip = [seen("r2", "failed", days_ago=2), seen("r1", "passed", days_ago=3)]
    assert quarantined([*steady, *flip], runs=2, since=WEEK_AGO) is None
    assert quarantined([*steady, *flip], runs=3, since=WEEK_AGO) is not None


def verdict(
    run: str, verdict: str, gate: str | None, key: str = "k", memory: bool = False
) -> SeenVerdict:
    return SeenVerdict(
        source="src/x.py",
        kind="python",
        verdict=verdict,
        gate=gate,
        skip_key=key,
        memory_skip=memory,
        reasons=["judge 0.40 < 0.70: vague matchers"] if gate else [],
        run_id=run,
        commit="c1",
        observed_at=NOW,
    )


def test_a_file_rejected_at_one_gate_with_the_same_key_is_skipped_k_nights_then_tried() -> None:
    two = [verdict("r2", "rejected", "judge"), verdict("r1", "rejected", "judge")]

    first = skip_of(two, "k", after=2, nights=2)

    assert first is not None and (first.gate, first.run_id, first.nights_skipped) == (
        "judge",
        "r2",
        0,
    )
    assert first.reason.startswith(
        "skipped by memory (1 of 2): rejected at the judge gate 2 nights running (last 2026-03-10"
    )
    assert first.reason.endswith(
        "with unchanged source, skill and prompts: judge 0.40 < 0.70: vague matchers"
    )
    once = [verdict("r3", "skipped", None, memory=True), *two]
    assert skip_of(once, "k", after=2, nights=2) is not None  # the second night
    twice = [verdict("r4", "skipped", None, memory=True), *once]
    assert skip_of(twice, "k", after=2, nights=2) is None  # K nights done: tried again


def test_no_skip_for_a_changed_key_another_gate_a_short_streak_or_k_zero() -> None:
    two = [verdict("r2", "rejected", "judge"), verdict("r1", "rejected", "judge")]
    assert skip_of(two, "changed", after=2, nights=3) is None
    assert (
        skip_of(
            [verdict("r2", "rejected", "judge"), verdict("r1", "rejected", "coverage")], "k", 2, 3
        )
        is None
    )
    assert skip_of(two[:1], "k", after=2, nights=3) is None
    assert skip_of(two[:1], "k", after=1, nights=3) is not None
    assert skip_of(two, "k", after=2, nights=0) is None
    assert skip_of([verdict("r2", "error", None), *two], "k", after=2, nights=3) is None
    assert skip_of([verdict("r2", "accepted", None), *two], "k", after=1, nights=3) is None


def case(case_id: str, status: str, name: str = "test_a") -> TestCaseResult:
    return TestCaseResult(id=case_id, name=name, file="tests/t.py", status=status)


def test_several_reports_merge_into_one_result_per_test_a_failure_winning() -> None:
    cases = [
        case("tests/t.py:3::test_a", "passed"),
        case("tests/t.py:9::test_b", "failed", "test_b"),
        case("tests/t.py:3::test_a#2", "failed"),  # another shard: it failed there
        case("tests/t.py:9::test_b#2", "failed", "test_b"),  # the same failure twice
        case("tests/t.py:12::test_c", "skipped", "test_c"),
    ]

    merged = merge_cases(cases)

    assert [(c.id, c.status, c.duplicate_of) for c in merged] == [
        ("tests/t.py:3::test_a", "failed", None),
        ("tests/t.py:9::test_b", "failed", None),
        ("tests/t.py:12::test_c", "skipped", None),
    ]
    assert case_key(cases[2]) == case_key(cases[0]) == "tests/t.py::test_a"
