"""Resume a post-merge run from its archive: the latest typed state of every group.

The flow archives the run's state (`state-NNN-<label>.json`) and each group's state after every
step (`groups/<group-id>/NNN-<step>.json`), numbered by one counter. The latest run state gives
the groups; a later group state replaces its group, so a run killed half-way resumes each group
from the last step it finished.
"""

from __future__ import annotations

import logging
import re
from typing import TypeVar

from pydantic import ValidationError

from tasks.core.errors import ArchiveError, BadInputError
from tasks.keep.archive import Archive, RunArchive
from tasks.repair.loop import NEEDS_MODEL, TOOL_FAILED
from tasks.repair.state import GroupState, RepairState

log = logging.getLogger(__name__)

M = TypeVar("M", RepairState, GroupState)

_RUN_STATE = re.compile(r"state-(\d+)-[\w-]+\.json")
_GROUP_STATE = re.compile(r"groups/([^/]+)/(\d+)-[\w-]+\.json")

# Decisions a resumed run keeps; every other group goes on from where it stopped.
FINAL_OUTCOMES = ("risky", "failed")


def load_state(run: RunArchive) -> RepairState:
    """The run's latest state, each group at its latest archived step.

    Raises:
        ArchiveError: no run state was archived, or one cannot be read.
    """
    keys = run.keys()
    runs = sorted((int(m[1]), k) for k in keys if (m := _RUN_STATE.fullmatch(k)))
    if not runs:
        raise ArchiveError(f"{run.uri}: no archived repair state to resume from")
    state = _read(run, runs[-1][1], RepairState)
    latest: dict[str, tuple[int, str]] = {}
    for k in keys:
        if (m := _GROUP_STATE.fullmatch(k)) and int(m[2]) > latest.get(m[1], (-1, ""))[0]:
            latest[m[1]] = (int(m[2]), k)
    for i, group in enumerate(state.groups):
        n, key = latest.get(group.group.id, (-1, ""))
        if n > runs[-1][0]:  # a step finished after the run state was written
            state.groups[i] = _read(run, key, GroupState)
    return state


def resumed_state(archive: Archive, run_id: str) -> RepairState:
    """The state of the archived run `run_id` (BadInputError when it cannot be resumed)."""
    try:
        return load_state(archive.find_run("post_merge", run_id))
    except ArchiveError as exc:
        raise BadInputError(f"cannot resume run {run_id}: {exc}") from None


def suspended_state(archive: Archive, run_id: str) -> tuple[RunArchive, RepairState] | None:
    """The archived state of this same flow run `run_id` when it ran before: a run suspended
    for a person (a hand-off under a deployment) starts the flow again when it is resumed.
    None for a run that never archived a state."""
    try:
        run = archive.find_run("post_merge", run_id)
        state = load_state(run)
    except ArchiveError:
        return None
    _adopt(run)
    return run, state


def _adopt(run: RunArchive) -> None:
    """Put the objects the suspended part archived in `run`'s manifest too (the same bytes
    again: a no-op in the store), so the manifest the run finally writes lists them all."""
    try:
        stored = run.keys()
        for key in stored:
            data = None if key == "manifest.json" else run.get_bytes(key)
            if data is not None:
                run.put_bytes(key, data)
    except ArchiveError as exc:  # the run goes on; its manifest may miss the earlier part
        log.warning("archive: %s", exc)


def last_number(run: RunArchive) -> int:
    """The highest step number archived for `run` (0 for none): a resumed suspension numbers
    its states after it, so the latest stays the latest."""
    keys = run.keys()
    found = [int(m[1]) for k in keys if (m := _RUN_STATE.fullmatch(k))]
    found += [int(m[2]) for k in keys if (m := _GROUP_STATE.fullmatch(k))]
    return max(found, default=0)


def reopen(state: RepairState, run_id: str, archive_uri: str) -> RepairState:
    """`state` as the start of a new run that resumes it.

    Fixed groups are committed again on the new run's branch; a group a tool failure stopped
    (a model or sandbox outage) retries the step that failed, with everything before it kept;
    a hand-off nobody answered is offered again; a person's decision stands; a group left
    for want of a model goes on from its reproduction; the rest go on from their last step.
    """
    resumed = state.model_copy(deep=True)
    # The same run resumed after a suspension keeps what it resumed from.
    resumed.resumed_from = state.resumed_from if state.run_id == run_id else state.run_id
    resumed.run_id, resumed.archive_uri, resumed.branch = run_id, archive_uri, None
    for g in resumed.groups:
        if g.outcome in FINAL_OUTCOMES:
            continue
        if g.outcome == "fixed":
            g.commit = None
        if g.outcome == "needs_model":
            g.reasons = [r for r in g.reasons if r != NEEDS_MODEL]
            g.reasons.append(f"resumed from run {state.run_id} after its reproduction")
        if g.failed_step is not None and g.human is None:
            g.step, g.failed_step = g.failed_step, None
            g.handoff_reasons = [r for r in g.handoff_reasons if not r.startswith(TOOL_FAILED)]
            g.reasons.append(f"resumed from run {state.run_id} at step {g.step}")
        g.outcome, g.finished_at = None, None
    return resumed


def _read(run: RunArchive, key: str, model: type[M]) -> M:
    raw = run.get_bytes(key)
    if raw is None:
        raise ArchiveError(f"{run.uri}/{key}: listed but not readable")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise ArchiveError(f"{run.uri}/{key}: not a {model.__name__}: {why}") from None
