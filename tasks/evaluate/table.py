"""`autopilot eval`: the quality table the field reports publish, from a nightly and a repair.

Plain functions; the command (flows/commands/eval.py) runs the flows and hands their results
here. Every figure follows from the runs' own records:

- first-draft load / pass rate: of the files the model worked on, how many first drafts loaded
  and how many passed every example, read from the outcome's structured round records
  (:class:`tasks.generate.types.RoundRecord`, round 1), never from prompt text;
- iterations to pass: mean rounds of the accepted files;
- coverage before / after: mean line coverage of the target files (after = the accepted test's
  coverage, else the unchanged before);
- judge before / after per file kind: the same instrument on the same files. Before is the
  judge's score of the spec that existed (flows/eval_before.py: run, static rubric, LLM judge,
  combined as ``autopilot judge`` does; 0 when there was none: no test scores the lowest
  level); after is the judge's score of the accepted spec, or the before score when the file's
  spec was not replaced (rejected). The static rubric's scores are given beside them, taken
  the same way; a file whose existing spec could not be judged is left out of both;
- mutation score: mean over the accepted files that have one (issue 15);
- autonomous fix / human intervention rate: the repair's own metrics over its failure groups;
- repair categories and outcomes: the shares of the repair's groups (issue 15);
- tokens: spent this run; tokens of outcomes re-used from the cache are counted apart
  (``cached_tokens``), never as spent;
- tokens and cost per file: cost is an ESTIMATE from
  :data:`tasks.core.prices.PRICES_PER_MTOK` (public list prices, USD per million tokens, input
  and output averaged 3:1 since the flows report totals).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.errors import BadInputError
from tasks.core.prices import price_per_token
from tasks.generate.report import NightlySummary
from tasks.generate.types import FileOutcome
from tasks.keep.git_safe import one_line, run_git
from tasks.repair.state import RepairSummary

log = logging.getLogger(__name__)


class Before(BaseModel):
    """The scores of a file's existing spec (none: 0, the rubric's lowest level)."""

    spec: str | None = None
    judge: float
    static: float | None = None


class KindScores(BaseModel):
    """Judge (and static rubric) scores for one file kind, before and after on the same files."""

    kind: str
    files: int
    judge_before: float | None
    judge_after: float | None
    static_before: float | None = None
    static_after: float | None = None


class QualityTable(BaseModel):
    """The numbers `autopilot eval` prints (rates in 0..1, None when nothing was measured)."""

    files: int = Field(description="Target files the model worked on")
    accepted: int
    first_draft_load_rate: float | None
    first_draft_pass_rate: float | None
    mean_iterations_to_pass: float | None
    coverage_before: float | None
    coverage_after: float | None
    judge: list[KindScores]
    mutation_score: float | None = Field(
        None, description="Mean mutation score of the accepted files that have one"
    )
    regressions: int = 0
    failing_tests: int = 0
    failure_groups: int = 0
    autonomous_fix_rate: float | None = None
    human_intervention_rate: float | None = None
    tokens: int
    cached_tokens: int = Field(
        0, description="Tokens of outcomes re-used from the cache: counted, not spent this run"
    )
    repair_categories: dict[str, float] = Field(
        default_factory=dict, description="Share of the repair's groups per category"
    )
    repair_outcomes: dict[str, float] = Field(
        default_factory=dict, description="Share of the repair's groups per outcome"
    )
    tokens_per_file: float | None
    cost_usd: float | None
    cost_per_file_usd: float | None
    price_note: str = "cost is an estimate from list prices (input:output tokens taken as 3:1)"


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def first_draft(outcome: FileOutcome) -> tuple[bool, bool] | None:
    """(loaded, passed) of the file's first draft, from its round records; None when no draft
    was ever measured."""
    first = next((r for r in outcome.rounds if r.round == 1), None)
    return None if first is None else (first.loaded, first.passed)


def quality_table(
    outcomes: Sequence[FileOutcome],
    *,
    before: Mapping[str, Before],
    nightly_tokens: int,
    generator_model: str,
    repair: RepairSummary | None = None,
    regressions: int = 0,
    repair_model: str | None = None,
) -> QualityTable:
    """The quality table of one evaluation.

    Args:
        outcomes: the nightly's per-file outcomes (skipped files are left out).
        before: source -> the scores of its existing spec (flows/eval_before.py); a file missing
            here is left out of the judge columns.
        nightly_tokens: the nightly's total tokens (cached files cost nothing this run).
        generator_model: the model whose price prices the nightly's tokens.
        repair: the repair's summary (issue 6's JSON), when regressions were injected.
        regressions: how many mutations were injected.
        repair_model: the model whose price prices the repair's tokens.
    """
    worked = [o for o in outcomes if o.verdict != "skipped"]
    drafts = [d for d in (first_draft(o) for o in worked) if d is not None]
    accepted = [o for o in worked if o.verdict == "accepted"]
    kinds: dict[str, list[FileOutcome]] = {}
    for o in worked:
        kinds.setdefault(o.kind, []).append(o)
    judge = [_kind_scores(kind, group, before) for kind, group in sorted(kinds.items())]
    tokens = nightly_tokens
    cost = _cost(nightly_tokens, generator_model)
    table = QualityTable(
        files=len(worked),
        accepted=len(accepted),
        first_draft_load_rate=_mean([1.0 if d[0] else 0.0 for d in drafts]),
        first_draft_pass_rate=_mean([1.0 if d[1] else 0.0 for d in drafts]),
        mean_iterations_to_pass=_mean([float(o.iterations) for o in accepted]),
        coverage_before=_mean([o.coverage_before for o in worked if o.coverage_before is not None]),
        coverage_after=_mean(
            [
                c
                for o in worked
                if (c := o.coverage_after if o.verdict == "accepted" else o.coverage_before)
                is not None
            ]
        ),
        judge=judge,
        mutation_score=_mean([o.mutation_score for o in accepted if o.mutation_score is not None]),
        tokens=tokens,
        cached_tokens=sum(o.tokens for o in worked if o.cached),
        tokens_per_file=None,
        cost_usd=None,
        cost_per_file_usd=None,
        regressions=regressions,
    )
    if repair is not None:
        metrics = repair.metrics
        table.failing_tests = repair.failures
        table.failure_groups = len(repair.groups)
        if repair.groups:
            table.autonomous_fix_rate = metrics.autonomous_fix_rate
            table.human_intervention_rate = metrics.human_intervention_rate
            table.repair_categories = dict(metrics.category_shares)
            table.repair_outcomes = dict(metrics.outcome_shares)
        repair_tokens = metrics.tokens
        table.tokens += repair_tokens
        repair_cost = _cost(repair_tokens, repair_model or generator_model)
        cost = None if cost is None or repair_cost is None else cost + repair_cost
    table.cost_usd = None if cost is None else round(cost, 6)
    if table.files:
        table.tokens_per_file = round(table.tokens / table.files, 1)
        if cost is not None:
            table.cost_per_file_usd = round(cost / table.files, 6)
    return table


def _kind_scores(kind: str, group: list[FileOutcome], before: Mapping[str, Before]) -> KindScores:
    """Before and after over the same files: those whose before was measured. After is the
    accepted spec's score, else the existing spec's (a rejected file's spec was not replaced)."""
    pairs = [(o, before[o.source]) for o in group if o.source in before]
    accepted = [(o, b) for o, b in pairs if o.verdict == "accepted"]
    kept = [b for o, b in pairs if o.verdict != "accepted"]

    def after(new: list[float | None], old: list[float | None]) -> float | None:
        return _mean([v for v in new + old if v is not None])

    return KindScores(
        kind=kind,
        files=len(group),
        judge_before=_mean([b.judge for _, b in pairs]),
        judge_after=after([o.judge_score for o, _ in accepted], [b.judge for b in kept]),
        static_before=_mean([b.static for _, b in pairs if b.static is not None]),
        static_after=after([o.static_score for o, _ in accepted], [b.static for b in kept]),
    )


def _cost(tokens: int, model: str) -> float | None:
    price = price_per_token(model)
    return None if price is None else tokens * price


def rows(table: QualityTable) -> list[tuple[str, str]]:
    """(metric, value) rows for printing, in the order the field reports use."""

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.0%}"

    def num(v: float | None, fmt: str = "{:.2f}") -> str:
        return "n/a" if v is None else fmt.format(v)

    def shares(values: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.0%}" for k, v in values.items()) or "n/a"

    out = [
        ("files worked on", str(table.files)),
        ("accepted", str(table.accepted)),
        ("first-draft load rate", pct(table.first_draft_load_rate)),
        ("first-draft pass rate", pct(table.first_draft_pass_rate)),
        ("iterations to pass (mean)", num(table.mean_iterations_to_pass)),
        ("coverage before", pct(table.coverage_before)),
        ("coverage after", pct(table.coverage_after)),
    ]
    for k in table.judge:
        judge, static = (f"{num(b)} -> {num(a)}" for b, a in _before_after(k))
        out.append((f"judge {k.kind} ({k.files} files)", f"{judge} (static {static})"))
    out += [
        ("mutation score (accepted)", pct(table.mutation_score)),
        ("regressions injected", str(table.regressions)),
        ("failing tests / groups", f"{table.failing_tests} / {table.failure_groups}"),
        ("autonomous fix rate", pct(table.autonomous_fix_rate)),
        ("human intervention rate", pct(table.human_intervention_rate)),
        ("repair categories", shares(table.repair_categories)),
        ("repair outcomes", shares(table.repair_outcomes)),
        ("tokens cached (not spent)", str(table.cached_tokens)),
        ("tokens per file", num(table.tokens_per_file, "{:.0f}")),
        ("cost per file (USD, est.)", num(table.cost_per_file_usd, "{:.4f}")),
    ]
    return out


def _before_after(k: KindScores) -> list[tuple[float | None, float | None]]:
    return [(k.judge_before, k.judge_after), (k.static_before, k.static_after)]


class EvalReport(BaseModel):
    """The ``autopilot eval --json`` document: the table, the injected regressions, and the two
    runs it follows from."""

    repo: str
    table: QualityTable
    mutations: list[str]
    nightly: NightlySummary
    repair: RepairSummary | None


def clone(repo: Path, dest: Path) -> Path:
    """A local clone of `repo` in `dest` (the evaluation never touches the user's repository).

    Raises:
        BadInputError: git could not clone it.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    args = ["clone", "--quiet", "--no-local", "--", str(repo), str(dest)]
    done = run_git(args, cwd=dest.parent, check=False, timeout=600)
    if done.returncode != 0:
        reason = one_line(done.stderr) if done.stderr.strip() else "git clone failed"
        raise BadInputError(f"{repo}: cannot clone for evaluation: {reason}")
    for key, value in (("user.name", "Autopilot Eval"), ("user.email", "eval@autopilot.invalid")):
        run_git(["config", key, value], cwd=dest)
    return dest
