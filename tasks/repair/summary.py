"""The end of a repair run, as plain functions: every group decided (outcome, category), the
groups a person must take when the run's environment is not there, and the run's markdown
summary (the Prefect artifact and the pull request's body)."""

from __future__ import annotations

from tasks.core.types import SuiteProblem
from tasks.repair.loop import NEEDS_MODEL, now
from tasks.repair.state import GroupState, RepairState, categorize, metrics, partial_outcome


def to_person(state: RepairState, not_ready: str) -> None:
    """Without the run's environment or services, every open group goes to a person."""
    why = f"the run's environment is not ready: {not_ready}"
    for g in state.groups:
        if g.outcome is None:
            g.handoff_reasons.append(why)


def not_ready_problem(line: str) -> SuiteProblem:
    """The run's environment or services not ready, as the suite problem a person takes."""
    return SuiteProblem(tool="autopilot", cause="environment", message=line)


def settle(state: RepairState) -> None:
    """Every group decided: a group still open needs a person."""
    for g in state.groups:
        if g.outcome is None:  # a PASSED patch that could not be committed is handled above
            g.outcome = "needs_human"
        if partial_outcome(g):
            g.outcome = "partial"
        g.category = categorize(g)
        g.finished_at = g.finished_at or now()


def summary_markdown(state: RepairState, name: str) -> str:
    """The run's markdown summary (the Prefect artifact and the pull request's body)."""
    m = metrics(state.groups)
    lines = [
        f"# Post-merge repair of {name}\n",
        f"Branch: {state.branch or '(none)'}\n",
        f"- autonomous fix rate: {m.autonomous_fix_rate:.0%}",
        f"- human intervention rate: {m.human_intervention_rate:.0%}",
        f"- mean time to fix: {m.mean_time_to_fix_s}s\n- tokens: {m.tokens}",
        f"- categories: {_pct(m.category_shares)}\n- outcomes: {_pct(m.outcome_shares)}",
    ]
    if state.report_errors:
        lines += ["\nReports not used:", *(f"- {e}" for e in state.report_errors)]
    if state.groups:
        lines.append("\n| group | signature | tests | reproduced | outcome |")
        lines.append("| --- | --- | --- | --- | --- |")
        for g in state.groups:
            sig = g.group.signature.replace("|", "/")
            lines.append(
                f"| {g.group.id} | `{sig}` | {len(g.group.tests)} | {reproduced(g)} | {g.outcome} |"
            )
    if any(g.outcome == "needs_model" for g in state.groups):
        lines.append(f"\n{NEEDS_MODEL}")
    return "\n".join(lines) + "\n"


def reproduced(state: GroupState) -> str:
    """Whether the group's failure showed again at the base commit: yes, no, or - (not
    re-run)."""
    r = state.reproduction
    return "-" if r is None else "yes" if r.reproduced else "no"


def _pct(shares: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0%}" for k, v in shares.items()) or "none"
