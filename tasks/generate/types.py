"""Typed results of the per-file generate -> lint -> run -> fix loop (plain data, no I/O)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tasks.core.types import Exchange, SourceKind, ValidationResult
from tasks.generate.gates import GateName, GateResult
from tasks.generate.mutation import MutationRecord

__all__ = ["Exchange", "FileOutcome", "FileSummary", "JudgeRecord", "RoundRecord", "Verdict"]

Verdict = Literal["accepted", "rejected", "error", "skipped"]


class JudgeRecord(BaseModel):
    """What the LLM judge said about the accepted-so-far spec."""

    spec: str
    score: float
    samples: list[float] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    prompt_version: str = ""
    rubric_version: str = ""


class RoundRecord(BaseModel):
    """One generate or fix round as measured: what ``eval`` reads first-draft rates from."""

    round: int = Field(description="1 for the first draft")
    loaded: bool
    passed: bool
    gate: GateName | None = Field(None, description="The first gate the round failed (None: clean)")


class FileOutcome(BaseModel):
    """Everything the nightly learnt about one target file."""

    source: str
    kind: SourceKind
    spec: str
    verdict: Verdict
    gate: GateName | None = None
    reasons: list[str] = Field(default_factory=list)
    iterations: int = 0
    coverage_before: float | None = None
    coverage_after: float | None = None
    judge_score: float | None = None
    judge_scores: list[float] = Field(
        default_factory=list, description="Every judge round's score, in order (the last counts)"
    )
    static_score: float | None = None
    mutation_score: float | None = None
    mutation: MutationRecord | None = None
    changed_lines: list[int] = Field(
        default_factory=list, description="Pre-merge: the lines the pull request changed"
    )
    diff_coverage_before: float | None = Field(
        None, description="Pre-merge: the share of the changed lines the suite ran before"
    )
    diff_coverage_after: float | None = Field(
        None, description="Pre-merge: the same share with the new tests"
    )
    tokens: int = 0
    model_calls: int = 0
    skill: str | None = None
    files: dict[str, str] = Field(
        default_factory=dict, description="Project-relative path -> content, new or changed"
    )
    exchanges: list[Exchange] = Field(default_factory=list)
    rounds: list[RoundRecord] = Field(
        default_factory=list, description="Each generate/fix round's measured result, in order"
    )
    validation: ValidationResult | None = None
    reruns: list[ValidationResult] = Field(default_factory=list)
    judge: JudgeRecord | None = None
    gates: list[GateResult] = Field(
        default_factory=list, description="Every gate run at the end, in order"
    )
    cached: bool = False

    def public(self) -> FileSummary:
        """The per-file entry of ``autopilot nightly --json`` (issue 5's contract)."""
        return FileSummary.model_validate(self.model_dump(include=set(FileSummary.model_fields)))


class FileSummary(BaseModel):
    """One file in the ``autopilot nightly --json`` document (issue 5's contract)."""

    source: str
    kind: SourceKind
    spec: str
    verdict: Verdict
    gate: GateName | None
    reasons: list[str]
    iterations: int
    coverage_before: float | None
    coverage_after: float | None
    judge_score: float | None
    static_score: float | None
    mutation_score: float | None = None
    tokens: int
