"""The post-merge routing (MISSION.md section 2): where a group goes after each step.

- after a diagnosis: confidence under ``min_confidence`` -> human, else -> surgeon;
- PASSED -> done; RISKY -> human;
- NEEDS_REVISION -> the surgeon again with the previous patch and the exact re-run output, or
  the diagnostician (which then tries its alternative hypothesis) when the feedback says the
  diagnosis was wrong; after ``max_retries`` revisions -> human;
- a tool failure (model, sandbox, git) -> human (tasks/repair/loop.py).

Plain functions over :class:`~tasks.repair.state.GroupState`: no I/O.
"""

from __future__ import annotations

from tasks.core.config import RepairSettings
from tasks.repair.state import GroupState, Step


def route_after_diagnosis(state: GroupState, settings: RepairSettings) -> Step:
    """Surgeon when the diagnosis is confident enough, else a person."""
    diagnosis = state.diagnosis
    if diagnosis is None:
        return "human"
    if diagnosis.confidence < settings.min_confidence:
        state.handoff_reasons.append(
            f"diagnosis confidence {diagnosis.confidence:.2f} is under "
            f"{settings.min_confidence:.2f}"
        )
        return "human"
    return "surgeon"


def route_after_audit(state: GroupState, settings: RepairSettings) -> Step:
    """Where a group goes after its latest patch was audited (see the module docstring).

    Side effects on `state`: the hand-off reasons, and the feedback for a new diagnosis.
    """
    attempt = state.last_attempt
    if attempt is None or attempt.audit is None:
        return "surgeon"
    audit = attempt.audit
    if audit.verdict == "PASSED":
        return "done"
    if audit.verdict == "RISKY":
        state.handoff_reasons.append("auditor: RISKY: " + "; ".join(audit.risks))
        return "human"
    revisions = len(state.attempts) - 1
    if revisions >= settings.max_retries:
        state.handoff_reasons.append(
            f"retries exhausted: {len(state.attempts)} patches audited, none passed"
        )
        return "human"
    if audit.diagnosis_wrong:
        state.feedback = diagnosis_feedback(state)
        return "diagnose"
    return "surgeon"


def diagnosis_feedback(state: GroupState) -> str:
    """Feedback for the diagnostician: why its diagnosis was rejected, and its alternative."""
    lines: list[str] = []
    attempt = state.last_attempt
    if attempt is not None and attempt.audit is not None:
        lines.append(attempt.audit.feedback)
        lines.append("The patch that followed your diagnosis:")
        lines.append(attempt.patch)
    diagnosis = state.diagnosis
    if diagnosis is not None and diagnosis.alternatives:
        best = max(diagnosis.alternatives, key=lambda a: a.confidence)
        lines.append(
            f"Your alternative hypothesis was: {best.root_cause} "
            f"(strategy: {best.repair_strategy}). Try it unless the evidence rules it out."
        )
    return "\n".join(line for line in lines if line)
