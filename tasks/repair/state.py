"""The post-merge repair state (typed, archived after every step) and its summary.

Plain data and plain functions: no I/O. The roles live in :mod:`tasks.repair.scout` (scout),
:mod:`tasks.repair.roles` (context, diagnostician, surgeon) and :mod:`tasks.repair.review`
(the auditor's patch review, with :mod:`tasks.repair.risk`); :mod:`tasks.repair.loop` applies
the routing (:mod:`tasks.repair.routing`) until a group is done or needs a person, and
``flows/post_merge.py`` runs it per group. The archived state keeps its names
(``Attempt.audit``, the step ``audit``): the archive layout is a contract, and "audit" in code
means the codebase audit (tasks/audit/).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.types import Exchange, TestCaseResult
from tasks.model.replies import Diagnosis

Verdict = Literal["PASSED", "NEEDS_REVISION", "RISKY"]
#: ``needs_model``: reproduced and grouped, but no model was configured to go further.
Outcome = Literal["fixed", "partial", "needs_human", "needs_model", "risky", "failed"]
Step = Literal["diagnose", "surgeon", "audit", "done", "human"]
HumanAction = Literal["approve", "reject", "edit"]
#: What kind of failure a group is (issue 15): where its cause lies.
Category = Literal["test-side", "code-side", "environment-dependency", "flaky", "unknown"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FailureGroup(_Model):
    """Failures that share one signature: one cause, repaired once."""

    id: str = Field(description="Short stable id derived from the signature")
    signature: str = Field(description="error type | message shape | innermost frame | source")
    error_type: str
    message_shape: str
    frame: str = Field(description="Innermost project (non-test) frame, path:line, or ''")
    source: str | None = Field(None, description="Source file the failing specs are mapped to")
    tests: list[TestCaseResult]

    @property
    def spec_files(self) -> list[str]:
        """The test files of the failing examples, in first-seen order."""
        seen: dict[str, None] = {}
        for case in self.tests:
            if case.file:
                seen.setdefault(case.file, None)
        return list(seen)

    @property
    def primary_path(self) -> str:
        """The file a request about this group is about: the first failing test's file."""
        return self.spec_files[0] if self.spec_files else (self.source or self.tests[0].id)


class CodeSnippet(_Model):
    """Lines of a repository file shown to a model."""

    path: str
    start_line: int
    end_line: int
    text: str


class GroupContext(_Model):
    """What the diagnostician and the surgeon see about a group (bounded)."""

    path: str
    language: str = Field(description="The tests' language (the toolchain's)")
    failures: list[dict[str, str]]
    code: list[CodeSnippet]
    git_changes: str
    failure_output: str
    examples: list[dict[str, str]] = Field(
        default_factory=list,
        description="Past accepted fixes of similar failures shown as examples (at most two)",
    )
    history: list[dict[str, str]] = Field(
        default_factory=list,
        description="The signature's earlier outcomes in the run history, newest first",
    )


class PatchReview(_Model):
    """The auditor's verdict on one patch (:func:`tasks.repair.review.review_patch`)."""

    verdict: Verdict
    feedback: str = Field("", description="What the surgeon or diagnostician must know")
    static_errors: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    changed_files: list[str] = Field(
        default_factory=list, description="Project-relative paths git writes for the patch"
    )
    changed_lines: int = 0
    tree: str | None = Field(
        None,
        description="The tree git made of the base commit plus the patch (what a commit "
        "of this patch must hold)",
    )
    rerun_output: str = ""
    rerun_specs: list[str] = Field(default_factory=list)
    diagnosis_wrong: bool = Field(
        False, description="The patch did not move the failure at all: rethink the cause"
    )
    fixed_tests: list[str] = Field(
        default_factory=list, description="The group's failing examples the re-run passed"
    )
    rejected_before: bool = Field(
        False, description="A person rejected this patch for this signature: never offered"
    )
    cached: bool = False


class Attempt(_Model):
    """One surgeon patch and its audit."""

    number: int
    diagnosis_index: int
    patch: str
    audit: PatchReview | None = None


class Reproduction(_Model):
    """The group's failing test files re-run at the base commit before any model is asked."""

    reproduced: bool = Field(description="Some failing example failed again (or did not run)")
    still_failing: list[str] = Field(default_factory=list)
    passed: list[str] = Field(default_factory=list, description="Reported failing, passed now")
    evidence: str = ""


class HumanDecisionRecord(_Model):
    """What a person answered at the hand-off (None in the state while unanswered)."""

    action: HumanAction
    patch: str | None = None
    note: str = ""


class GroupState(_Model):
    """Everything known about one group; the unit that is archived and resumed."""

    group: FailureGroup
    step: Step = "diagnose"
    failed_step: Step | None = Field(
        None, description="The step a tool failure interrupted (a resumed run retries it)"
    )
    context: GroupContext | None = None
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    feedback: str = Field("", description="Feedback for the next diagnosis, '' at first")
    handoff_reasons: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list, description="What happened, in words")
    human: HumanDecisionRecord | None = None
    reproduction: Reproduction | None = None
    category: Category | None = None
    outcome: Outcome | None = None
    final_patch: str | None = None
    commit: str | None = None
    tokens: int = 0
    exchanges: list[Exchange] = Field(
        default_factory=list, description="Every diagnostician and surgeon prompt and reply"
    )
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @property
    def diagnosis(self) -> Diagnosis | None:
        """The diagnosis in use (the latest)."""
        return self.diagnoses[-1] if self.diagnoses else None

    @property
    def last_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def offered_attempt(self) -> Attempt | None:
        """The last attempt that may be shown to a person (never a patch rejected before)."""
        offered = [a for a in self.attempts if a.audit is None or not a.audit.rejected_before]
        return offered[-1] if offered else None


class MergedGroup(_Model):
    """A group another shard of the same commit repairs (run history's shard merge)."""

    id: str
    signature: str
    tests: list[str]
    run_id: str = Field(description="The repair run of the same commit that took it")


class RepairState(_Model):
    """The whole run: what the post-merge flow archives after every step."""

    run_id: str
    repo: str
    project: str = Field("", description="Project directory inside the git repository")
    base_commit: str
    toolchain: str
    branch: str | None = None
    archive_uri: str | None = None
    resumed_from: str | None = Field(None, description="The run id this run resumed")
    failures: int = 0
    report_errors: list[str] = Field(default_factory=list)
    groups: list[GroupState] = Field(default_factory=list)
    shard_of: str | None = Field(
        None, description="The first repair run of the same commit, when this run is a shard"
    )
    merged: list[MergedGroup] = Field(
        default_factory=list, description="Groups another shard of the commit repairs"
    )


class Metrics(_Model):
    """The run's repair metrics (MISSION.md: what to track)."""

    autonomous_fix_rate: float
    human_intervention_rate: float
    mean_time_to_fix_s: float | None
    tokens: int
    category_shares: dict[str, float] = Field(
        default_factory=dict, description="Share of the groups per category (issue 15)"
    )
    outcome_shares: dict[str, float] = Field(
        default_factory=dict, description="Share of the groups per outcome (issue 15)"
    )


def _shares(values: list[str]) -> dict[str, float]:
    return {v: round(values.count(v) / len(values), 4) for v in sorted(set(values))}


def categorize(state: GroupState) -> Category:
    """The group's category: flaky or environment-dependency when known, else the side the
    diagnosis says must change (test-side, code-side), else unknown."""
    if state.category is not None:
        return state.category
    diagnosis = state.diagnosis
    if diagnosis is not None and diagnosis.wrong_side == "test":
        return "test-side"
    if diagnosis is not None and diagnosis.wrong_side == "code":
        return "code-side"
    return "unknown"


def partial_outcome(state: GroupState) -> bool:
    """A group not fixed whose last audited patch made some, not all, of its tests pass."""
    last = state.last_attempt
    if state.outcome not in ("needs_human", "failed") or last is None or last.audit is None:
        return False
    return 0 < len(last.audit.fixed_tests) < len(state.group.tests)


def metrics(groups: list[GroupState]) -> Metrics:
    """Autonomous fix rate (fixed without a person), human intervention rate, mean time to fix
    (over fixed groups, from the start of the group to its commit) and tokens."""
    total = len(groups)
    autonomous = sum(1 for g in groups if g.outcome == "fixed" and g.human is None)
    handed = sum(1 for g in groups if g.handoff_reasons)
    times = [
        (g.finished_at - g.started_at).total_seconds()
        for g in groups
        if g.outcome == "fixed" and g.started_at and g.finished_at
    ]
    return Metrics(
        autonomous_fix_rate=round(autonomous / total, 4) if total else 0.0,
        human_intervention_rate=round(handed / total, 4) if total else 0.0,
        mean_time_to_fix_s=round(sum(times) / len(times), 3) if times else None,
        tokens=sum(g.tokens for g in groups),
        category_shares=_shares([g.category or "unknown" for g in groups]),
        outcome_shares=_shares([g.outcome or "needs_human" for g in groups]),
    )


class GroupSummary(_Model):
    """One group in the `--json` document of `autopilot repair` (issue 6's contract)."""

    id: str
    signature: str
    tests: list[str]
    outcome: Outcome | None
    category: Category | None
    attempts: int
    diagnosis: Diagnosis | None
    patch: str | None
    reasons: list[str]
    commit: str | None
    reproduction: Reproduction | None = Field(
        None, description="The failing test files re-run at the base commit (null: not re-run)"
    )

    @classmethod
    def of(cls, state: GroupState) -> GroupSummary:
        """The summary of one group's state."""
        last = state.offered_attempt
        return cls(
            id=state.group.id,
            signature=state.group.signature,
            tests=[t.id for t in state.group.tests],
            outcome=state.outcome,
            category=state.category,
            attempts=len(state.attempts),
            diagnosis=state.diagnosis,
            patch=state.final_patch or (last.patch if last else None),
            reasons=state.reasons + [r for r in state.handoff_reasons if r not in state.reasons],
            commit=state.commit,
            reproduction=state.reproduction,
        )


def _unset(value: object) -> bool:
    return not value


class RepairSummary(_Model):
    """The `--json` document of `autopilot repair` (issue 6's contract): what the post-merge
    flow returns."""

    run_id: str
    repo: str
    base_commit: str
    branch: str | None
    archive_uri: str | None
    failures: int
    report_errors: list[str]
    groups: list[GroupSummary]
    metrics: Metrics
    push_error: str | None = Field(
        None, exclude_if=_unset, description="Why a requested push failed (only then)"
    )
    pull_request: str | None = Field(
        None,
        exclude_if=_unset,
        description="The pull request opened (its URL), or why none was (only when asked)",
    )
    shard_of: str | None = Field(
        None,
        exclude_if=_unset,
        description="The first repair run of the same commit this run joined (only then)",
    )
    merged: list[MergedGroup] = Field(
        default_factory=list,
        exclude_if=_unset,
        description="Groups another shard of the commit repairs (only when there are some)",
    )

    @classmethod
    def of(cls, state: RepairState) -> RepairSummary:
        """The summary of a run's state."""
        return cls(
            run_id=state.run_id,
            repo=state.repo,
            base_commit=state.base_commit,
            branch=state.branch,
            archive_uri=state.archive_uri,
            failures=state.failures,
            report_errors=list(state.report_errors),
            groups=[GroupSummary.of(g) for g in state.groups],
            metrics=metrics(state.groups),
            shard_of=state.shard_of,
            merged=list(state.merged),
        )

    def exit_code(self) -> int:
        """0 when every group was fixed (or nothing failed), 1 otherwise (``needs_model``
        included: the run is done, the failures are not repaired)."""
        return 0 if all(g.outcome == "fixed" for g in self.groups) else 1
