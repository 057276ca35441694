"""What memory decides: the flaky quarantine, the nightly's skips, the merge of shards' results.

Plain functions over what the store gave back (no I/O), so each rule is tested on its own.

- **Quarantine** (:func:`quarantined`): a test whose results, among its last ``flaky_runs``
  observed runs within ``flaky_window_days``, both passed and failed at one commit is flaky. The
  same code gave both answers, so a patch cannot be right: it is never sent to repair, and the
  results that flipped are its evidence. It leaves the quarantine by itself once the flip is
  older than the window or than its last N runs (a test that passes steadily again).
- **Skip** (:func:`skip_of`): a file whose last ``skip_after`` tries (the nights it was skipped
  by memory are not tries) were all rejected at one gate, with the skip key it has now (its
  source, skill and prompts unchanged), is skipped for ``skip_nights`` nights, then tried again.
- **Shard merge** (:func:`merge_cases`): the cases of several reports of one commit become one
  result per test: a failure wins over a pass (and both stay observations: a test that failed
  in one shard and passed in another at one commit is flaky evidence), repeats of one failure
  are one failure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tasks.core.types import TestCaseResult
from tasks.history.records import (
    FAILING,
    Evidence,
    Quarantine,
    SeenResult,
    SeenVerdict,
    Skip,
    case_key,
)


def quarantined(results: Sequence[SeenResult], runs: int, since: dt.datetime) -> Quarantine | None:
    """The quarantine of one test, from its results newest first (None: not flaky).

    Args:
        results: every result of the test the store holds from `since` on, newest first.
        runs: how many of its last observed runs count (``history.flaky_runs``).
        since: the start of the window (``now - history.flaky_window_days``).
    """
    recent = [r for r in results if r.observed_at >= since]
    kept: list[str] = []
    for r in recent:
        if r.run_id not in kept:
            kept.append(r.run_id)
    window = [r for r in recent if r.run_id in kept[:runs]]
    by_commit: dict[str, list[SeenResult]] = {}
    for r in window:
        by_commit.setdefault(r.commit, []).append(r)
    for commit, seen in by_commit.items():  # newest commit first
        passed = [r for r in seen if r.status == "passed"]
        failed = [r for r in seen if r.status in FAILING]
        if passed and failed:
            pair = sorted([passed[0], failed[0]], key=lambda r: r.observed_at)
            evidence = [
                Evidence(
                    run_id=r.run_id, source=r.source, status=r.status, observed_at=r.observed_at
                )
                for r in pair
            ]
            return Quarantine(test_key=seen[0].test_key, commit=commit, evidence=evidence)
    return None


def skip_of(verdicts: Sequence[SeenVerdict], skip_key: str, after: int, nights: int) -> Skip | None:
    """Whether the nightly skips a file tonight, from its verdicts newest first.

    Args:
        verdicts: the file's last verdicts, newest first.
        skip_key: the digest of its source, skill and prompts now.
        after: rejections running at one gate that start a skip (``history.skip_after``).
        nights: nights skipped after them (``history.skip_nights``; 0: never).
    """
    if nights <= 0:
        return None
    skipped = 0
    for v in verdicts:
        if not v.memory_skip:
            break
        skipped += 1
    tries = [v for v in verdicts if not v.memory_skip][:after]
    if skipped >= nights or len(tries) < after:
        return None
    gate = tries[0].gate
    if gate is None or any(
        t.verdict != "rejected" or t.gate != gate or t.skip_key != skip_key for t in tries
    ):
        return None
    last = tries[0]
    running = "" if after == 1 else f" {after} nights running"
    why = last.reasons[0] if last.reasons else ""
    reason = (
        f"skipped by memory ({skipped + 1} of {nights}): rejected at the {gate} gate{running} "
        f"(last {last.observed_at:%Y-%m-%d}, run {last.run_id[:8]}) with unchanged source, "
        f"skill and prompts" + (f": {why}" if why else "")
    )
    return Skip(
        source=last.source,
        gate=gate,
        run_id=last.run_id,
        rejected_at=last.observed_at,
        nights_skipped=skipped,
        reason=reason[:600],
    )


_SEVERITY = {"error": 3, "failed": 2, "passed": 1, "skipped": 0}


def merge_cases(cases: Sequence[TestCaseResult]) -> list[TestCaseResult]:
    """One case per test (by :func:`~tasks.history.records.case_key`), in first-seen order:
    the most severe result wins (error, failed, passed, skipped), the first of equals."""
    chosen: dict[str, TestCaseResult] = {}
    for case in cases:
        key = case_key(case)
        held = chosen.get(key)
        if held is None or _SEVERITY[case.status] > _SEVERITY[held.status]:
            # The winner keeps the first case's id: the test's own, not a shard's ``#2``.
            update = {} if held is None else {"id": held.id, "duplicate_of": None}
            chosen[key] = case.model_copy(update=update)
    order = list(dict.fromkeys(case_key(c) for c in cases))
    return [chosen[k] for k in order]
