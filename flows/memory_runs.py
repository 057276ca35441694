"""What a nightly and a repair tell the run history, and the run's history artifact.

A nightly writes its run (the baseline's line coverage, the judge's median, files accepted and
rejected per kind, tokens, estimated cost), one verdict per target (with the skip key the
skip rule compares) and every test result of its baseline suite (source ``baseline``). A
repair writes its run (groups, fixed without a person, handed to a person, tokens, cost; the
run it joined as a shard), one record per group, the results of its reports (``ci-report``) or
of its own suite run (``baseline``), and its reproductions at the base commit (``repeat``).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence

from flows.audit import artifact_key
from flows.memory import Memory
from tasks.core.prices import call_cost, price_per_token
from tasks.core.types import TestCaseResult
from tasks.generate.report import NightlyReport
from tasks.history.chart import render_trend_chart
from tasks.history.records import (
    FileVerdict,
    GroupRecord,
    Observation,
    Quarantine,
    RunBatch,
    RunRecord,
    Skip,
    Source,
    utc_now,
)
from tasks.history.trend import trend_markdown
from tasks.model.messages import CallRecord
from tasks.repair.state import GroupState, RepairState

log = logging.getLogger(__name__)


def records_cost(records: Sequence[CallRecord]) -> float | None:
    """The estimated cost of a run's model calls (None: no call at a known price)."""
    costs = [call_cost(r.model, r.input_tokens, r.output_tokens) for r in records]
    known = [c for c in costs if c is not None]
    return round(sum(known), 6) if known else None


def observations(cases: Sequence[TestCaseResult], source: Source) -> list[Observation]:
    """The observations of parsed cases (skipped cases say nothing about flakiness)."""
    return [Observation.of(c, source) for c in cases if c.status != "skipped"]


def nightly_batch(
    memory: Memory,
    report: NightlyReport,
    coverage: float | None,
    baseline: Sequence[TestCaseResult],
    skip_keys: dict[str, str | None],
    remembered: dict[str, Skip],
    records: Sequence[CallRecord] | None,
) -> RunBatch:
    """The records of one nightly run."""
    price = price_per_token(memory.settings.models.generator)
    verdicts: list[FileVerdict] = []
    by_kind: dict[str, dict[str, int]] = {}
    for f in report.files:
        verdicts.append(
            FileVerdict(
                **f.model_dump(include=set(FileVerdict.model_fields) & set(type(f).model_fields)),
                cost=None if price is None else round(f.tokens * price, 6),
                skip_key=skip_keys.get(f.source),
                memory_skip=f.source in remembered,
            )
        )
        counts = by_kind.setdefault(f.kind, {})
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    scores = [f.judge_score for f in report.files if f.judge_score is not None]
    fresh = [f for f in report.files if not f.cached]
    cost = records_cost(records) if records is not None else None
    if records is None and price is not None:  # files in other processes (Dask)
        cost = round(sum(f.tokens for f in fresh) * price, 6)
    run = RunRecord(
        run_id=report.run_id,
        flow="nightly",
        repo=memory.repo,
        commit=report.base_commit,
        started_at=memory.started_at,
        finished_at=utc_now(),
        tokens=report.tokens,
        cost=cost,
        coverage=coverage,
        judge_median=round(statistics.median(scores), 4) if scores else None,
        accepted=sum(1 for f in report.files if f.verdict == "accepted"),
        rejected=sum(1 for f in report.files if f.verdict == "rejected"),
        by_kind=by_kind,
    )
    return RunBatch(run=run, observations=observations(baseline, "baseline"), verdicts=verdicts)


def repeats(groups: Sequence[GroupState]) -> list[Observation]:
    """The reproductions at the base commit, as results (source ``repeat``)."""
    out: list[Observation] = []
    for g in groups:
        r = g.reproduction
        if r is None or not r.evidence or "did not run" in r.evidence:
            continue
        for case in g.group.tests:
            if case.id in r.passed or case.id in r.still_failing:
                status = "passed" if case.id in r.passed else case.status
                out.append(Observation.of(case, "repeat").model_copy(update={"status": status}))
    return out


def repair_batch(
    memory: Memory,
    state: RepairState,
    seen: Sequence[Observation],
    records: Sequence[CallRecord] | None,
) -> RunBatch:
    """The records of one repair run (a shard too: it names the run it joined)."""
    price = price_per_token(memory.settings.models.surgeon)
    groups = [
        GroupRecord(
            group_id=g.group.id,
            signature=g.group.signature,
            outcome=g.outcome,
            category=g.category,
            attempts=len(g.attempts),
            tokens=g.tokens,
            cost=None if price is None else round(g.tokens * price, 6),
            human=g.human.action if g.human is not None else None,
            handed_off=bool(g.handoff_reasons),
            reasons=(g.reasons + g.handoff_reasons)[:5],
        )
        for g in state.groups
    ]
    run = RunRecord(
        run_id=state.run_id,
        flow="post-merge",
        repo=memory.repo,
        commit=state.base_commit,
        started_at=memory.started_at,
        finished_at=utc_now(),
        merged_into=state.shard_of,
        tokens=sum(g.tokens for g in state.groups),
        cost=records_cost(records) if records is not None else None,
        groups=len(groups),
        fixed_autonomously=sum(1 for g in state.groups if g.outcome == "fixed" and not g.human),
        handed_off=sum(1 for g in groups if g.handed_off),
    )
    return RunBatch(run=run, observations=[*seen, *repeats(state.groups)], groups=groups)


def seen_before_lines(memory: Memory) -> dict[str, str]:
    """Each of the run's signatures seen before, with its earlier outcomes in words."""
    out: dict[str, str] = {}
    for signature, earlier in memory.seen_before.items():
        out[signature] = "; ".join(
            f"{g.outcome or 'open'} after {g.attempts} attempt(s) on {g.observed_at:%Y-%m-%d} "
            f"(run {g.run_id[:8]})"
            for g in earlier
        )
    return out


def publish_history(
    memory: Memory,
    name: str,
    quarantine: Sequence[Quarantine] = (),
    skips: Sequence[Skip] = (),
) -> str | None:
    """The run's history artifact (markdown: the trend, the quarantine, the skips, the
    signatures seen before, the chart), keyed ``history-<name>``; returns its markdown, None
    without a store."""
    if not memory.available:
        return None
    from prefect.artifacts import create_markdown_artifact

    points = memory.points()
    listed = list(quarantine) or memory.all_quarantined()
    try:
        chart: bytes | None = render_trend_chart(points, f"Autopilot trend: {name}")
    except (ValueError, RuntimeError, OSError) as exc:  # a picture never fails the run
        log.error("trend chart not drawn: %s", exc)
        chart = None
    text = trend_markdown(
        memory.repo, memory.where, points, listed, list(skips), seen_before_lines(memory), chart
    )
    key = artifact_key("history", name)
    create_markdown_artifact(text, key=key, description=f"Memory across runs of {memory.repo}")
    return text
