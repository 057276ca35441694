"""The operator's view of the history: one point per run (the shards of a repair merged into
its first run), the markdown of the run's artifact, and the figures ``autopilot history``
prints.

Figures per point: the baseline's line coverage and the judge's median score (nightly), files
accepted and rejected per kind (nightly), the autonomous fix rate and the human intervention
rate (repair: fixed without a person, and handed to a person, over the run's groups), tokens and
the estimated cost (tasks/core/prices.py).
"""

from __future__ import annotations

import base64
import datetime as dt

from pydantic import BaseModel, Field

from tasks.history.records import Flow, Quarantine, RunRecord, SeenResult, SeenVerdict, Skip


class TrendPoint(BaseModel):
    """One run in the trend."""

    run_id: str
    flow: Flow
    started_at: dt.datetime
    commit: str
    shards: int = Field(1, description="Invocations merged into this run (repair shards)")
    coverage: float | None = None
    judge_median: float | None = None
    accepted: int = 0
    rejected: int = 0
    by_kind: dict[str, dict[str, int]] = Field(default_factory=dict)
    groups: int = 0
    fixed_autonomously: int = 0
    handed_off: int = 0
    autonomous_fix_rate: float | None = None
    human_intervention_rate: float | None = None
    tokens: int = 0
    cost: float | None = None

    @property
    def label(self) -> str:
        """How the chart's axis names the run."""
        return f"{self.started_at:%m-%d %H:%M}\n{self.commit[:7]}"


class TestHistory(BaseModel):
    """One test's results (``autopilot history --test``), newest first."""

    __test__ = False  # not a pytest test class

    test: str
    results: list[SeenResult]
    quarantine: Quarantine | None = None


class HistoryDocument(BaseModel):
    """The ``autopilot history --json`` document."""

    store: str = Field(description="Where the history is kept (no password)")
    repo: str = Field(description="The repository as the history names it")
    runs: list[TrendPoint] = Field(description="The last runs, oldest first (shards merged)")
    quarantined: list[Quarantine] = Field(description="Tests quarantined as flaky now")
    skipped: list[SeenVerdict] = Field(
        description="Files the last nightly skipped because of their earlier rejections"
    )
    test: TestHistory | None = Field(None, description="The test asked for with --test")


def trend(runs: list[RunRecord]) -> list[TrendPoint]:
    """The points of `runs` (oldest first): a shard's figures are added to the run it joined."""
    points: dict[str, TrendPoint] = {}
    for run in runs:
        owner = points.get(run.merged_into or "")
        if owner is None:
            points[run.run_id] = _point(run)
            continue
        owner.shards += 1
        owner.groups += run.groups
        owner.fixed_autonomously += run.fixed_autonomously
        owner.handed_off += run.handed_off
        owner.tokens += run.tokens
        if run.cost is not None:
            owner.cost = (owner.cost or 0.0) + run.cost
    for p in points.values():
        if p.flow == "post-merge" and p.groups:
            p.autonomous_fix_rate = round(p.fixed_autonomously / p.groups, 4)
            p.human_intervention_rate = round(p.handed_off / p.groups, 4)
        if p.cost is not None:
            p.cost = round(p.cost, 6)
    return list(points.values())


def _point(run: RunRecord) -> TrendPoint:
    return TrendPoint(
        run_id=run.run_id,
        flow=run.flow,
        started_at=run.started_at,
        commit=run.commit,
        coverage=run.coverage,
        judge_median=run.judge_median,
        accepted=run.accepted,
        rejected=run.rejected,
        by_kind=run.by_kind,
        groups=run.groups,
        fixed_autonomously=run.fixed_autonomously,
        handed_off=run.handed_off,
        tokens=run.tokens,
        cost=run.cost,
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def trend_rows(points: list[TrendPoint]) -> list[dict[str, str]]:
    """The trend as table rows (the artifact's table, ``autopilot history``'s)."""
    return [
        {
            "run": p.run_id[:8],
            "started": f"{p.started_at:%Y-%m-%d %H:%M}",
            "flow": p.flow + (f" ({p.shards} shards)" if p.shards > 1 else ""),
            "commit": p.commit[:12],
            "coverage": _pct(p.coverage),
            "judge median": _num(p.judge_median),
            "accepted": str(p.accepted) if p.flow == "nightly" else "-",
            "rejected": str(p.rejected) if p.flow == "nightly" else "-",
            "fix rate": _pct(p.autonomous_fix_rate),
            "human rate": _pct(p.human_intervention_rate),
            "tokens": str(p.tokens),
            "cost": _num(p.cost, "${:.4f}"),
        }
        for p in points
    ]


def _table(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(row[h]).replace("|", "\\|").replace("\n", " ") for h in header]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def trend_markdown(
    repo: str,
    store: str,
    points: list[TrendPoint],
    quarantine: list[Quarantine],
    skips: list[Skip],
    seen_before: dict[str, str],
    chart: bytes | None,
) -> str:
    """The run's history artifact: the trend table, the quarantine with its evidence, tonight's
    skips with their reasons, the signatures seen before, and the chart (a PNG data URI, which
    the Prefect UI renders without reaching any other server)."""
    lines = [f"# Memory across runs: {repo}", "", f"Store: `{store}`, {len(points)} run(s)."]
    lines += ["", "## Trend", "", *_table(trend_rows(points))]
    lines += ["", "## Quarantined as flaky (never sent to repair)", ""]
    lines += _table([{"test": q.test_key, "evidence": q.line()} for q in quarantine])
    lines += ["", "## Skipped by memory", ""]
    lines += _table([{"file": s.source, "gate": s.gate, "reason": s.reason} for s in skips])
    if seen_before:
        lines += ["", "## Repair signatures seen before", ""]
        lines += _table([{"signature": k, "earlier": v} for k, v in seen_before.items()])
    if chart:
        data = base64.b64encode(chart).decode("ascii")
        lines += ["", "## Trend chart", "", f"![trend of {repo}](data:image/png;base64,{data})"]
    return "\n".join(lines) + "\n"
