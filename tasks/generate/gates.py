"""The acceptance gates, in their fixed order.

A generated or repaired test is accepted only if: it loads and every example passes (`load`,
`pass`); it passes again on every re-run (`flaky`); lint is clean after autocorrect (`lint`); the
target's coverage reaches `min_coverage` or gains `min_coverage_gain` over the baseline
(`coverage`); the static rubric finds nothing forbidden (`static`); the judge score reaches
`min_judge` (`judge`). The first failing gate is recorded with its reasons. Pure functions: the
caller gathers the evidence, and never asks the judge before :func:`execution_gate` passed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tasks.core.config import GateSettings
from tasks.core.types import FileCoverage, LintOffense, StaticVerdict, ValidationResult

GateName = Literal["load", "pass", "flaky", "lint", "coverage", "static", "judge"]
GATE_ORDER: tuple[GateName, ...] = ("load", "pass", "flaky", "lint", "coverage", "static", "judge")
MAX_REASONS = 20


class GateDecision(BaseModel):
    """The verdict of the gates: accepted, or the first gate that failed and why."""

    accepted: bool
    gate: GateName | None = None
    reasons: list[str] = Field(default_factory=list)

    @classmethod
    def reject(cls, gate: GateName, reasons: list[str]) -> GateDecision:
        return cls(accepted=False, gate=gate, reasons=reasons[:MAX_REASONS])


class Evidence(BaseModel):
    """Everything the gates look at for one target file."""

    validation: ValidationResult
    reruns: list[ValidationResult] = Field(default_factory=list)
    lint: list[LintOffense] = Field(default_factory=list)
    coverage_before: float | None = None
    static: StaticVerdict | None = None
    forbidden_rules: frozenset[str] = frozenset()
    judge_score: float | None = None


def _failed_examples(result: ValidationResult) -> list[str]:
    out = []
    for ex in result.examples:
        if ex.status in ("failed", "error"):
            first = (ex.message or ex.error_type or ex.status).strip().splitlines()
            out.append(f"{ex.id}: {first[0] if first else ex.status}")
    return out


def execution_gate(result: ValidationResult) -> GateDecision:
    """The `load` and `pass` gates: the only proof that a test is valid is running it."""
    if not result.loaded or result.load_error:
        return GateDecision.reject("load", [result.load_error or "the spec did not load"])
    if result.reason:
        return GateDecision.reject("pass", [result.reason])
    failures = _failed_examples(result)
    if failures:
        return GateDecision.reject("pass", failures)
    if not result.passed:
        return GateDecision.reject("pass", ["no example ran"])
    return GateDecision(accepted=True)


def coverage_gate(
    coverage: FileCoverage | None, before: float | None, settings: GateSettings
) -> GateDecision:
    """Coverage reaches the threshold, or improves on the baseline by the required gain."""
    if coverage is None:
        return GateDecision.reject("coverage", ["no coverage was measured for the target"])
    ratio = coverage.ratio
    if ratio + 1e-9 >= settings.min_coverage:
        return GateDecision(accepted=True)
    if before is not None and ratio - before + 1e-9 >= settings.min_coverage_gain:
        return GateDecision(accepted=True)
    lines = ", ".join(str(n) for n in coverage.uncovered_lines[:50])
    reason = f"coverage {ratio:.0%} < {settings.min_coverage:.0%}"
    if before is not None:
        reason += f" (baseline {before:.0%}, gain below {settings.min_coverage_gain:.0%})"
    return GateDecision.reject("coverage", [reason, f"uncovered lines: {lines}"])


def evaluate(evidence: Evidence, settings: GateSettings, *, judge: bool = True) -> GateDecision:
    """Run every gate in order; the first failure decides.

    Args:
        evidence: what was measured for the target.
        settings: the thresholds.
        judge: False to stop before the judge gate (to decide whether judging is worth a call).
    """
    decision = execution_gate(evidence.validation)
    if not decision.accepted:
        return decision
    for i, rerun in enumerate(evidence.reruns, start=1):
        again = execution_gate(rerun)
        if not again.accepted:
            return GateDecision.reject(
                "flaky", [f"re-run {i} of {len(evidence.reruns)} failed", *again.reasons]
            )
    if len(evidence.reruns) < settings.flaky_runs:
        return GateDecision.reject(
            "flaky", [f"{len(evidence.reruns)} re-runs, {settings.flaky_runs} required"]
        )
    if evidence.lint:
        return GateDecision.reject(
            "lint", [f"{o.path}:{o.line}: {o.rule}: {o.message}" for o in evidence.lint]
        )
    decision = coverage_gate(evidence.validation.coverage, evidence.coverage_before, settings)
    if not decision.accepted:
        return decision
    if evidence.static is not None:
        forbidden = [f for f in evidence.static.findings if f.rule in evidence.forbidden_rules]
        if forbidden:
            return GateDecision.reject(
                "static", [f"{f.path}:{f.line}: {f.rule}: {f.message}" for f in forbidden]
            )
    if not judge:
        return GateDecision(accepted=True)
    if evidence.judge_score is None:
        return GateDecision.reject("judge", ["no judge score"])
    if evidence.judge_score + 1e-9 < settings.min_judge:
        return GateDecision.reject(
            "judge", [f"judge score {evidence.judge_score:.2f} < {settings.min_judge:.2f}"]
        )
    return GateDecision(accepted=True)
