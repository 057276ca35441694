"""The human hand-off: the group's state for a person, a pause for their typed decision.

The flow run waits for a :class:`HumanDecision` (approve the last patch, reject, or edit: a
patch of their own, checked for safety and that it applies). Outside a deployment it pauses
with :func:`prefect.flow_runs.pause_flow_run` (the process waits). Under a deployment it
suspends with :func:`prefect.flow_runs.suspend_flow_run`: the process exits and the worker is
free; the resumed run starts the flow again, which reopens its own archived state at the
hand-off (flows/post_merge.py), and the same call with the same key then returns the answer.
Before waiting it emits ``autopilot.human.needed`` and publishes the group's state as a
markdown artifact (once per suspension). Unanswered in time, the group ends ``needs_human``.
Must be called from inside a flow run.
"""

from __future__ import annotations

import logging
import math
from typing import Literal

from prefect.artifacts import create_markdown_artifact
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run, suspend_flow_run
from prefect.input import RunInput
from pydantic import Field, ValidationError

from tasks.repair.loop import RepairEnv
from tasks.repair.patch import git_view
from tasks.repair.risk import parse_patch
from tasks.repair.state import GroupState, HumanDecisionRecord

log = logging.getLogger(__name__)

HUMAN_EVENT = "autopilot.human.needed"


class HumanDecision(RunInput):
    """What a person answers when a group is handed over (the form in the Prefect UI)."""

    action: Literal["approve", "reject", "edit"] = Field(
        description="approve the last patch, reject it, or edit: apply `patch` instead"
    )
    patch: str | None = Field(None, description="The edited unified diff (action 'edit')")
    note: str = Field("", description="Why: kept in the archived state")


def handoff_markdown(state: GroupState) -> str:
    """The whole state of a group formatted for the person who decides."""
    g, d, last = state.group, state.diagnosis, state.offered_attempt
    out = [
        f"# Repair needs a person: {g.id}",
        f"Signature: `{g.signature}`",
        "## Why",
        *[f"- {r}" for r in state.handoff_reasons],
        "## Failing tests",
        *[f"- `{t.id}`: {t.name}" for t in g.tests],
    ]
    if d is not None:
        out += [
            "## Diagnosis",
            f"{d.root_cause} (confidence {d.confidence:.2f}, "
            f"wrong side: {d.wrong_side or 'not stated'})",
            f"Strategy: {d.repair_strategy}",
            *[f"- alternative: {a.root_cause} ({a.confidence:.2f})" for a in d.alternatives],
        ]
    if last is not None:
        out += ["## Last patch", "```diff", last.patch.rstrip(), "```"]
        if last.audit is not None:
            out += ["## Audit", f"{last.audit.verdict}: {last.audit.feedback}"]
    out += [
        "## Answer",
        "Resume this flow run with `action` approve (commit the last patch), reject, or edit "
        "(give `patch`, a unified diff), and an optional `note`.",
    ]
    return "\n".join(out)


def _force_running() -> None:
    """After a pause timed out, put the run back to Running so it can finish the others."""
    from prefect import get_client
    from prefect.context import FlowRunContext
    from prefect.states import Running

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(ctx.flow_run.id, Running(), force=True)


def _check_edit(env: RepairEnv, patch: str) -> str | None:
    """Why a patch from a person (or approved by one) cannot be applied, or None: the same
    checks as a model's patch before it runs (what git writes for it on the base commit)."""
    problems = parse_patch(patch).problems
    if problems:
        return "; ".join(problems)
    view = git_view(env.repo_root, env.sub, env.base_commit, patch)
    if isinstance(view, str):
        return view
    return "; ".join(view.info.problems) or None


def _announce(state: GroupState, run_id: str) -> None:
    """Tell people: the ``autopilot.human.needed`` event and the group's state as an artifact."""
    from prefect.events import emit_event

    gid = state.group.id
    emit_event(
        HUMAN_EVENT,
        resource={"prefect.resource.id": f"autopilot.repair.{run_id}.{gid}"},
        payload={
            "group": gid,
            "signature": state.group.signature,
            "reasons": state.handoff_reasons,
        },
    )
    create_markdown_artifact(handoff_markdown(state), key=f"handoff-{gid}-{run_id[:8].lower()}")


def deployed() -> bool:
    """True inside a flow run of a deployment: a hand-off suspends instead of pausing."""
    from prefect.runtime import deployment

    return deployment.id is not None


def _suspend_key(gid: str) -> str:
    return f"human-{gid}"


def _offered_before(gid: str) -> bool:
    """True when this flow run already suspended for `gid` (a resumed run reaching the same
    hand-off again): Prefect saved the decision's schema under the suspension's key."""
    from prefect.input.actions import read_flow_run_input
    from prefect.input.run_input import keyset_from_base_key

    schema_key = keyset_from_base_key(f"suspended-{_suspend_key(gid)}")["schema"]
    return read_flow_run_input(schema_key) is not None


def _wait_for_decision(gid: str, timeout_s: float, poll_s: int) -> HumanDecision:
    """The person's answer: a pause in this process, or a suspension under a deployment
    (raises Prefect's Pause signal the first time; returns the answer once resumed)."""
    timeout = max(1, math.ceil(timeout_s))
    if deployed():
        return suspend_flow_run(
            wait_for_input=HumanDecision, timeout=timeout, key=_suspend_key(gid)
        )
    return pause_flow_run(
        wait_for_input=HumanDecision, timeout=timeout, poll_interval=poll_s, key=_suspend_key(gid)
    )


def hand_off(state: GroupState, env: RepairEnv, run_id: str, timeout_s: float, poll_s: int) -> None:
    """Pause (or suspend, under a deployment) the flow run for a person's decision on `state`;
    record what they said.

    Unanswered within `timeout_s` (or with a zero timeout): the group ends needs_human.
    """
    gid = state.group.id
    if not (deployed() and _offered_before(gid)):
        _announce(state, run_id)
    if timeout_s <= 0:
        state.outcome = "needs_human"
        state.reasons.append("handed to a person; the human timeout left no time to wait")
        return
    try:
        decision = _wait_for_decision(gid, timeout_s, poll_s)
    except FlowPauseTimeout:
        _force_running()
        state.outcome = "needs_human"
        state.reasons.append("no answer from a person within the human timeout")
        return
    except ValidationError as exc:
        # An answer that does not fit HumanDecision (the UI validates, the API may not).
        state.outcome = "needs_human"
        state.reasons.append(f"the answer could not be used: {exc.errors()[0]['msg']}")
        return
    _apply(state, env, decision)


def _apply(state: GroupState, env: RepairEnv, decision: HumanDecision) -> None:
    """The group after a person's `decision`."""
    state.human = HumanDecisionRecord(
        action=decision.action, patch=decision.patch, note=decision.note
    )
    last = state.offered_attempt
    if decision.action == "reject":
        risky = last is not None and last.audit is not None and last.audit.verdict == "RISKY"
        state.outcome = "risky" if risky else "failed"
        state.reasons.append(f"rejected by a person: {decision.note}".rstrip(": "))
    elif decision.action == "approve":
        error = _check_edit(env, last.patch) if last is not None else "there is no patch"
        if error:
            # Approval never overrides the safety checks (paths outside the repo, .git, ...).
            state.outcome = "failed"
            state.reasons.append(f"approved, but the patch cannot be applied: {error}")
        elif last is not None:
            state.final_patch = last.patch
            state.reasons.append(f"approved by a person: {decision.note}".rstrip(": "))
    else:
        error = _check_edit(env, decision.patch or "") if decision.patch else "no patch given"
        if error:
            state.outcome = "failed"
            state.reasons.append(f"edited patch refused: {error}")
        else:
            state.final_patch = decision.patch
            state.reasons.append(f"edited by a person: {decision.note}".rstrip(": "))
