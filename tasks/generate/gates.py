"""The acceptance gates, in their fixed order: the one place a test is accepted or rejected.

A generated or repaired test is accepted only if: it loads and every example passes (`load`,
`pass`); it passes again on every re-run (`flaky`); lint is clean after autocorrect (`lint`);
the target's line coverage reaches `min_coverage`, or its own ceiling when lines are marked as
reachable by no test, or, for a file that already had specs, gains `min_coverage_gain` over the
baseline (`coverage`); for a pre-merge target (lines a pull request changed), at least
`min_diff_coverage` of its changed lines that the coverage tool measures ran (`diff_coverage`;
its `coverage` gate then asks only that the file's coverage does not fall below its baseline:
the rest of the file is the nightly's to cover); the static rubric finds none of the rejected
rules in its test files or the support files written with them (`static`); the support files
it wrote or changed are left out when the tests pass without them, and otherwise change no
result but the new tests' (`support`, :mod:`tasks.generate.support_gate`); the judge score
reaches `min_judge` (`judge`); with `min_mutation` set, the new tests kill that share of the
mutants made on the lines they cover, a pre-merge target's changed lines only (`mutation`; off
by default, the score is reported all the same).
:func:`evaluate` runs them in order and returns every result up to the first failure, which
decides. Pure functions: the caller gathers the evidence, and never asks the judge before the
execution gates passed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Literal, get_args

from pydantic import BaseModel, Field

from tasks.core.config import GateSettings
from tasks.core.types import FileCoverage, LintOffense, StaticVerdict, ValidationResult

GateName = Literal[
    "load",
    "pass",
    "flaky",
    "lint",
    "coverage",
    "diff_coverage",
    "static",
    "support",
    "judge",
    "mutation",
    "suite",
]
#: The gates a file's outcome runs through, in order (``suite``, the whole-branch proof, after).
GATE_ORDER: tuple[GateName, ...] = tuple(g for g in get_args(GateName) if g != "suite")
MAX_REASONS = 20


class GateResult(BaseModel):
    """One gate's verdict on the evidence."""

    gate: GateName
    passed: bool
    reasons: list[str] = Field(
        default_factory=list,
        description="Why it failed; on a passed gate, what it decided (support files left out)",
    )


class GateDecision(BaseModel):
    """The gates' verdict: every gate run, in order, up to the first that failed."""

    results: list[GateResult] = Field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """No gate that ran failed."""
        return all(r.passed for r in self.results)

    @property
    def gate(self) -> GateName | None:
        """The gate that failed, or None."""
        return next((r.gate for r in self.results if not r.passed), None)

    @property
    def reasons(self) -> list[str]:
        """Why the failed gate failed ([] when accepted)."""
        return next((list(r.reasons) for r in self.results if not r.passed), [])

    @classmethod
    def reject(cls, gate: GateName, reasons: list[str]) -> GateDecision:
        return cls(results=[GateResult(gate=gate, passed=False, reasons=reasons[:MAX_REASONS])])


class Evidence(BaseModel):
    """Everything the gates look at for one target file (None: not measured yet)."""

    validation: ValidationResult
    reruns: list[ValidationResult] | None = None
    lint: list[LintOffense] = Field(default_factory=list)
    coverage_before: float | None = None
    had_specs: bool = Field(False, description="The target had specs before (gain may count)")
    no_cover: list[int] = Field(
        default_factory=list, description="Target lines the project marks as reachable by no test"
    )
    static: StaticVerdict | None = None
    forbidden_rules: frozenset[str] = frozenset()
    support_breaks: list[str] = Field(
        default_factory=list,
        description="What the support files the reply wrote or changed change in other "
        "results (the canary, the existing tests)",
    )
    support_notes: list[str] = Field(
        default_factory=list, description="What the support gate decided (files left out)"
    )
    changed_lines: list[int] = Field(
        default_factory=list,
        description="Pre-merge: the target's lines the pull request added or changed ([]: a "
        "nightly target, the diff_coverage gate passes)",
    )
    judge_score: float | None = None
    mutation_score: float | None = None
    mutants: tuple[int, int] = Field((0, 0), description="(killed, made) behind the score")


def _failed_examples(result: ValidationResult) -> list[str]:
    out = []
    for ex in result.examples:
        if ex.status in ("failed", "error"):
            first = (ex.message or ex.error_type or ex.status).strip().splitlines()
            out.append(f"{ex.id}: {first[0] if first else ex.status}")
    return out


def _result(gate: GateName, reasons: list[str]) -> GateResult:
    return GateResult(gate=gate, passed=not reasons, reasons=reasons[:MAX_REASONS])


def load_gate(result: ValidationResult) -> GateResult:
    """`load`: the spec loaded (the only proof that a test is valid is running it)."""
    if not result.loaded or result.load_error:
        return _result("load", [result.load_error or "the spec did not load"])
    return _result("load", [])


def pass_gate(result: ValidationResult) -> GateResult:
    """`pass`: the run was not stopped, and every example passed (at least one ran)."""
    if result.reason:
        return _result("pass", [result.reason])
    failures = _failed_examples(result)
    if failures:
        return _result("pass", failures)
    if not result.passed:
        return _result("pass", ["no example ran"])
    return _result("pass", [])


def execution(result: ValidationResult) -> GateDecision:
    """The `load` and `pass` gates on one run (a re-run stops at the first that fails)."""
    first = load_gate(result)
    return GateDecision(results=[first] if not first.passed else [first, pass_gate(result)])


def coverage_ceiling(coverage: FileCoverage, no_cover: Collection[int] = ()) -> float:
    """The most a test can cover: executable lines minus those the project marks as reachable
    by no test (``no_cover``) that the tool still counted as uncovered."""
    if coverage.executable_lines == 0:
        return 1.0
    unreachable = len(set(coverage.uncovered_lines) & set(no_cover))
    return (coverage.executable_lines - unreachable) / coverage.executable_lines


def coverage_gate(
    coverage: FileCoverage | None,
    before: float | None,
    settings: GateSettings,
    *,
    had_specs: bool = False,
    no_cover: Collection[int] = (),
) -> GateResult:
    """The target's line coverage reaches `min_coverage`, or the file's own ceiling when that
    is lower; a file that already had specs may pass instead by gaining `min_coverage_gain`
    over its baseline. Branch coverage, where measured, is reported, never gated."""
    if coverage is None:
        return _result("coverage", ["no coverage was measured for the target"])
    ratio = coverage.ratio
    ceiling = coverage_ceiling(coverage, no_cover)
    required = min(settings.min_coverage, ceiling)
    if ratio + 1e-9 >= required:
        return _result("coverage", [])
    gain_counts = had_specs and before is not None
    if gain_counts and ratio - (before or 0.0) + 1e-9 >= settings.min_coverage_gain:
        return _result("coverage", [])
    reason = f"coverage {ratio:.0%} < {required:.0%}"
    if required < settings.min_coverage:
        reason += " (the file's ceiling: lines marked as reachable by no test)"
    if gain_counts:
        reason += f" (baseline {before:.0%}, gain below {settings.min_coverage_gain:.0%})"
    missed = [n for n in coverage.uncovered_lines if n not in set(no_cover)]
    reasons = [reason, f"uncovered lines: {', '.join(str(n) for n in missed[:50])}"]
    if coverage.branches:
        partial = ", ".join(str(n) for n in coverage.partial_lines[:50]) or "none"
        reasons.append(
            f"branches: {coverage.covered_branches or 0}/{coverage.branches} taken; "
            f"lines with a branch never taken: {partial}"
        )
    return _result("coverage", reasons)


def _load(e: Evidence, s: GateSettings) -> GateResult:
    return load_gate(e.validation)


def _pass(e: Evidence, s: GateSettings) -> GateResult:
    return pass_gate(e.validation)


def _flaky(e: Evidence, s: GateSettings) -> GateResult:
    reruns = e.reruns or []
    for i, rerun in enumerate(reruns, start=1):
        again = execution(rerun)
        if not again.accepted:
            return _result("flaky", [f"re-run {i} of {len(reruns)} failed", *again.reasons])
    if len(reruns) < s.flaky_runs:
        return _result("flaky", [f"{len(reruns)} re-runs, {s.flaky_runs} required"])
    return _result("flaky", [])


def _lint(e: Evidence, s: GateSettings) -> GateResult:
    return _result("lint", [f"{o.path}:{o.line}: {o.rule}: {o.message}" for o in e.lint])


def _coverage(e: Evidence, s: GateSettings) -> GateResult:
    result = coverage_gate(
        e.validation.coverage,
        e.coverage_before,
        s,
        had_specs=e.had_specs,
        no_cover=e.no_cover,
    )
    coverage, before = e.validation.coverage, e.coverage_before
    # Pre-merge: the changed lines are diff_coverage's; the file must only not lose coverage.
    kept = coverage is not None and before is not None and coverage.ratio + 1e-9 >= before
    if not result.passed and e.changed_lines and kept:
        return _result("coverage", [])
    return result


def diff_coverage_gate(
    coverage: FileCoverage | None,
    changed: Collection[int],
    settings: GateSettings,
    no_cover: Collection[int] = (),
) -> GateResult:
    """`diff_coverage`: of the `changed` lines (those the project does not mark as reachable
    by no test) that the coverage tool measures, at least `min_diff_coverage` ran. No changed
    line (a nightly target), or none the tool measures, passes."""
    lines = set(changed) - set(no_cover)
    if not lines:
        return _result("diff_coverage", [])
    if coverage is None:
        return _result("diff_coverage", ["no coverage was measured for the target"])
    ran, measured = coverage.lines_run(lines)
    if measured == 0 or ran / measured + 1e-9 >= settings.min_diff_coverage:
        return _result("diff_coverage", [])
    missed = sorted(lines & set(coverage.uncovered_lines))
    return _result(
        "diff_coverage",
        [
            f"changed lines covered {ran}/{measured} ({ran / measured:.0%}) < "
            f"{settings.min_diff_coverage:.0%}",
            f"changed lines no test runs: {', '.join(str(n) for n in missed[:50])}",
        ],
    )


def diff_share(coverage: FileCoverage | None, changed: Collection[int]) -> float | None:
    """The share of the `changed` lines the coverage tool measures that ran (None: no changed
    line, or none it measures; 0.0 when nothing was measured at all)."""
    if not changed:
        return None
    if coverage is None:
        return 0.0
    ran, measured = coverage.lines_run(changed)
    return round(ran / measured, 4) if measured else None


def _diff_coverage(e: Evidence, s: GateSettings) -> GateResult:
    return diff_coverage_gate(e.validation.coverage, e.changed_lines, s, e.no_cover)


def _static(e: Evidence, s: GateSettings) -> GateResult:
    found = e.static.findings if e.static is not None else []
    forbidden = [f for f in found if f.rule in e.forbidden_rules]
    return _result("static", [f"{f.path}:{f.line}: {f.rule}: {f.message}" for f in forbidden])


def _support(e: Evidence, s: GateSettings) -> GateResult:
    if e.support_breaks:
        return _result("support", list(e.support_breaks))
    return GateResult(gate="support", passed=True, reasons=e.support_notes[:MAX_REASONS])


def _judge(e: Evidence, s: GateSettings) -> GateResult:
    if e.judge_score is None:
        return _result("judge", ["no judge score"])
    if e.judge_score + 1e-9 < s.min_judge:
        return _result("judge", [f"judge score {e.judge_score:.2f} < {s.min_judge:.2f}"])
    return _result("judge", [])


def _mutation(e: Evidence, s: GateSettings) -> GateResult:
    if s.min_mutation is None or e.mutation_score is None:
        return _result("mutation", [])  # off, or no mutant could be made
    if e.mutation_score + 1e-9 < s.min_mutation:
        killed, made = e.mutants
        return _result(
            "mutation",
            [
                f"mutation score {e.mutation_score:.2f} < {s.min_mutation:.2f} "
                f"({made - killed} of {made} mutants survived)"
            ],
        )
    return _result("mutation", [])


#: The gates in their order (GATE_ORDER), each a function of the evidence and the thresholds.
GATES: tuple[tuple[GateName, Callable[[Evidence, GateSettings], GateResult]], ...] = (
    ("load", _load),
    ("pass", _pass),
    ("flaky", _flaky),
    ("lint", _lint),
    ("coverage", _coverage),
    ("diff_coverage", _diff_coverage),
    ("static", _static),
    ("support", _support),
    ("judge", _judge),
    ("mutation", _mutation),
)


def evaluate(
    evidence: Evidence, settings: GateSettings, *, skip: Collection[GateName] = ()
) -> GateDecision:
    """Run the gates in order; the first failure decides.

    Args:
        evidence: what was measured for the target.
        settings: the thresholds.
        skip: gates whose evidence is not measured yet (the re-runs and the judge are only
            worth paying for once everything before them passed).
    """
    decision = GateDecision()
    for name, gate in GATES:
        if name in skip:
            continue
        result = gate(evidence, settings)
        decision.results.append(result)
        if not result.passed:
            break
    return decision
