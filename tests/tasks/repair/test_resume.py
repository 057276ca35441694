"""A run resumed after a suspension finds its own archived state (tasks/repair/resume.py), on a
real local archive: the latest state, numbers after the last, the manifest listing both parts,
a person's decision kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.errors import BadInputError
from tasks.keep.archive import Archive, open_archive
from tasks.repair.resume import last_number, reopen, resumed_state, suspended_state
from tasks.repair.state import FailureGroup, GroupState, HumanDecisionRecord, RepairState

RUN = "0b6e1f1e-1111-4c2b-9a0e-000000000001"


def group(gid: str) -> GroupState:
    return GroupState(
        group=FailureGroup(
            id=gid, signature=f"E | {gid}", error_type="E", message_shape=gid, frame="", tests=[]
        )
    )


def state() -> RepairState:
    return RepairState(
        run_id=RUN,
        repo="/r",
        base_commit="abc",
        toolchain="python-pytest",
        resumed_from="an-earlier-run",
        groups=[group("g-1"), group("g-2")],
    )


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    return open_archive(str(tmp_path / "archive"), home=tmp_path / "home")


def suspended_run(archive: Archive) -> None:
    """What a run archives before it suspends at g-1's hand-off (g-2 was decided before)."""
    run = archive.run("post_merge", RUN)
    run.put_json("state-001-scout.json", state())
    at_handoff = group("g-1")
    at_handoff.step = "human"
    run.put_json("groups/g-1/002-context.json", group("g-1"))
    run.put_json("groups/g-1/004-audit.json", at_handoff)
    decided = group("g-2")
    decided.step, decided.human = "human", HumanDecisionRecord(action="approve")
    decided.final_patch = "--- a/x\n+++ b/x\n"
    run.put_json("groups/g-2/003-human.json", decided)
    run.put_json("model-calls.json", [])


def test_a_run_that_never_archived_a_state_is_not_a_resumed_suspension(
    archive: Archive,
) -> None:
    assert suspended_state(archive, RUN) is None
    archive.run("post_merge", RUN).put_json("model-calls.json", [])
    assert suspended_state(archive, RUN) is None  # objects, but no state to go on from


def test_a_suspended_run_reopens_its_own_state_at_the_hand_off(archive: Archive) -> None:
    suspended_run(archive)
    found = suspended_state(archive, RUN)
    assert found is not None
    run, earlier = found
    assert last_number(run) == 4
    resumed = reopen(earlier, RUN, run.uri)
    assert resumed.run_id == RUN
    assert resumed.resumed_from == "an-earlier-run"  # the same run: not "resumed from itself"
    g1, g2 = resumed.groups
    assert (g1.step, g1.outcome, g1.human) == ("human", None, None)  # offered again
    assert g2.human is not None and g2.final_patch  # the decision stands
    # The manifest the run writes at its end lists what the suspended part archived.
    run.put_json("state-005-resumed.json", resumed)
    keys = [o.key for o in run.finalize().objects]
    assert {"state-001-scout.json", "groups/g-1/004-audit.json", "model-calls.json"} <= set(keys)
    assert "state-005-resumed.json" in keys


def test_another_run_resumed_by_id_records_where_it_came_from(archive: Archive) -> None:
    suspended_run(archive)
    resumed = reopen(resumed_state(archive, RUN), "a-new-run", "/uri")
    assert resumed.resumed_from == RUN
    with pytest.raises(BadInputError, match="cannot resume run nope"):
        resumed_state(archive, "nope")
