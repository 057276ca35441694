"""What the run history gives the repair: a group's quarantined tests split off into a flaky
group handed to a person (the rest repaired as before), and a signature's earlier outcomes as
the prompts show them."""

from __future__ import annotations

import datetime as dt

from tasks.history.records import Evidence, Quarantine, SeenGroup, case_key
from tasks.repair.memory import earlier_text, quarantine_groups
from tasks.repair.state import FailureGroup
from tests.tasks.repair.test_units import case

AT = dt.datetime(2026, 3, 1, 2, 30, tzinfo=dt.UTC)


def _group() -> FailureGroup:
    tests = [
        case("tests/test_a.py::test_one", "boom", file="tests/test_a.py"),
        case("tests/test_a.py::test_two", "boom", file="tests/test_a.py"),
    ]
    return FailureGroup(
        id="g-1",
        signature="E | boom | - | src/a.py",
        error_type="E",
        message_shape="boom",
        frame="",
        source="src/a.py",
        tests=tests,
    )


def test_quarantined_tests_leave_their_group_for_a_flaky_one_never_repaired() -> None:
    group = _group()
    flaky = group.tests[1]
    evidence = [
        Evidence(run_id="run-aaaaaaaa", source="baseline", status="passed", observed_at=AT),
        Evidence(run_id="run-bbbbbbbb", source="ci-report", status="failed", observed_at=AT),
    ]
    quarantine = {
        case_key(flaky): Quarantine(test_key=case_key(flaky), commit="c" * 40, evidence=evidence)
    }

    rest, held = quarantine_groups([group], quarantine)

    assert rest.group.id == "g-1" and [t.id for t in rest.group.tests] == [group.tests[0].id]
    assert (rest.step, rest.outcome, rest.category) == ("diagnose", None, None)
    assert [t.id for t in held.group.tests] == [flaky.id]
    assert held.group.signature == f"quarantined | {group.signature}" and held.group.id != "g-1"
    assert (held.step, held.outcome, held.category) == ("human", "needs_human", "flaky")
    assert held.handoff_reasons == []  # not a hand-off of the repair
    assert held.reasons == [
        f"quarantined as flaky by the run history, never repaired: {flaky.id}: flipped at "
        f"commit {'c' * 12}: passed in run run-aaaa (baseline, 2026-03-01 02:30); failed in "
        "run run-bbbb (ci-report, 2026-03-01 02:30)"
    ]
    # Nothing quarantined: the groups as they were.
    [same] = quarantine_groups([group], {})
    assert same.group == group


def test_earlier_outcomes_as_the_prompts_show_them() -> None:
    seen = SeenGroup(
        group_id="g-1",
        signature="s",
        outcome="needs_human",
        attempts=3,
        human="reject",
        reasons=["attempt 3: NEEDS_REVISION: still failing", "retries exhausted"],
        run_id="r",
        commit="c",
        observed_at=AT,
    )

    assert earlier_text([seen]) == [
        {
            "when": "2026-03-01",
            "outcome": "needs_human",
            "attempts": "3",
            "decision": "reject",
            "reasons": "attempt 3: NEEDS_REVISION: still failing; retries exhausted",
        }
    ]
