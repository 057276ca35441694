"""What the history keeps and gives back: plain pydantic records, no I/O."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.types import TestCaseResult

Flow = Literal["nightly", "post-merge"]
#: Where a test result was observed: a CI report given to the repair, a baseline suite run (the
#: nightly's, or the repair's own run without reports), a re-run of the same tests (the repair's
#: reproduction at the base commit).
Source = Literal["ci-report", "baseline", "repeat"]
FAILING = ("failed", "error")
_DUPLICATE = re.compile(r"#\d+$")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


def utc_now() -> dt.datetime:
    """Now, in UTC (every time the history keeps is UTC)."""
    return dt.datetime.now(dt.UTC)


def case_key(case: TestCaseResult) -> str:
    """The stable key of a test across runs and reporters: ``file::name`` when the case names
    both (the parser's id without its ``:line`` and a duplicate's ``#n``, so a JUnit report
    and a toolchain's own run of the same test agree), else its id without ``#n``."""
    if case.file and case.name:
        return f"{case.file}::{case.name}"
    return _DUPLICATE.sub("", case.id)


class Observation(_Record):
    """One observed result of one test."""

    test_key: str
    test_id: str
    status: str
    source: Source
    duration: float = 0.0
    file: str | None = None
    message: str | None = Field(None, description="The failure's first line (bounded)")

    @classmethod
    def of(cls, case: TestCaseResult, source: Source) -> Observation:
        """The observation of a parsed case."""
        first = (case.message or "").strip().splitlines()
        return cls(
            test_key=case_key(case),
            test_id=case.id,
            status=case.status,
            source=source,
            duration=case.duration,
            file=case.file,
            message=first[0][:300] if first else None,
        )


class SeenResult(Observation):
    """An observation as the store gives it back: with its run, commit and time."""

    run_id: str
    commit: str
    observed_at: dt.datetime


class FileVerdict(_Record):
    """One nightly verdict of one file."""

    source: str
    kind: str
    verdict: str
    gate: str | None = None
    reasons: list[str] = Field(default_factory=list)
    coverage_before: float | None = None
    coverage_after: float | None = None
    judge_score: float | None = None
    static_score: float | None = None
    mutation_score: float | None = None
    tokens: int = 0
    cost: float | None = None
    iterations: int = 0
    skip_key: str | None = Field(
        None, description="Digest of the source, the skill and the prompts the file was tried with"
    )
    memory_skip: bool = Field(False, description="Skipped because of an earlier rejection")
    cached: bool = False


class SeenVerdict(FileVerdict):
    """A verdict as the store gives it back."""

    run_id: str
    commit: str
    observed_at: dt.datetime


class GroupRecord(_Record):
    """One repair group's outcome."""

    group_id: str
    signature: str
    outcome: str | None
    category: str | None = None
    attempts: int = 0
    tokens: int = 0
    cost: float | None = None
    human: str | None = Field(None, description="A person's decision: approve, reject, edit")
    handed_off: bool = Field(False, description="The group was handed to a person")
    reasons: list[str] = Field(default_factory=list)


class SeenGroup(GroupRecord):
    """A group as the store gives it back."""

    run_id: str
    commit: str
    observed_at: dt.datetime


class RunRecord(_Record):
    """One run (one invocation of a flow) and its figures."""

    run_id: str
    flow: Flow
    repo: str
    commit: str
    started_at: dt.datetime
    finished_at: dt.datetime
    merged_into: str | None = Field(
        None, description="The repair run of the same commit this shard joined"
    )
    tokens: int = 0
    cost: float | None = None
    coverage: float | None = Field(None, description="The baseline suite's line coverage")
    judge_median: float | None = None
    accepted: int = 0
    rejected: int = 0
    groups: int = 0
    fixed_autonomously: int = 0
    handed_off: int = 0
    by_kind: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Per file kind: verdict -> files"
    )


class RunBatch(_Record):
    """Everything one run writes, in one transaction."""

    run: RunRecord
    observations: list[Observation] = Field(default_factory=list)
    verdicts: list[FileVerdict] = Field(default_factory=list)
    groups: list[GroupRecord] = Field(default_factory=list)


class Evidence(_Record):
    """One result that makes a test flaky."""

    run_id: str
    source: Source
    status: str
    observed_at: dt.datetime


class Quarantine(_Record):
    """A test quarantined as flaky: never sent to repair."""

    test_key: str
    commit: str
    evidence: list[Evidence]

    def line(self) -> str:
        """The evidence in words."""
        parts = [
            f"{e.status} in run {e.run_id[:8]} ({e.source}, {e.observed_at:%Y-%m-%d %H:%M})"
            for e in self.evidence
        ]
        return f"flipped at commit {self.commit[:12]}: " + "; ".join(parts)


class Skip(_Record):
    """A target the nightly skips because of its earlier rejections."""

    source: str
    gate: str
    run_id: str = Field(description="The run of the last rejection")
    rejected_at: dt.datetime
    nights_skipped: int = Field(description="Nights skipped before this one")
    reason: str
