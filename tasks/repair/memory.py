"""What the run history gives the repair: flaky tests taken out of their groups before any
model is asked, and a signature's earlier outcomes for the diagnostician and the surgeon.

A group's tests that the history quarantines (:mod:`tasks.history.rules`: they passed and failed
at one commit within their last runs) become a group of their own, ``flaky``, handed to a person
with the evidence and never repaired; the group's other tests are repaired as before.
"""

from __future__ import annotations

import hashlib

from tasks.history.records import Quarantine, SeenGroup, case_key
from tasks.repair.state import FailureGroup, GroupState

#: Characters of an earlier outcome's reasons shown in a prompt.
MAX_REASON_CHARS = 300


def quarantine_groups(
    groups: list[FailureGroup], quarantine: dict[str, Quarantine]
) -> list[GroupState]:
    """The groups' states, each quarantined test moved into a flaky group of its signature."""
    out: list[GroupState] = []
    for group in groups:
        flaky = [t for t in group.tests if case_key(t) in quarantine]
        rest = [t for t in group.tests if case_key(t) not in quarantine]
        if rest:
            out.append(GroupState(group=group.model_copy(update={"tests": rest})))
        if not flaky:
            continue
        signature = f"quarantined | {group.signature}"
        held = group.model_copy(
            update={
                "id": "g-" + hashlib.sha256(signature.encode()).hexdigest()[:10],
                "signature": signature,
                "tests": flaky,
            }
        )
        reasons = [
            f"quarantined as flaky by the run history, never repaired: {t.id}: "
            + quarantine[case_key(t)].line()
            for t in flaky
        ]
        out.append(
            GroupState(
                group=held, step="human", outcome="needs_human", category="flaky", reasons=reasons
            )
        )
    return out


def earlier_text(earlier: list[SeenGroup]) -> list[dict[str, str]]:
    """A signature's earlier outcomes as the prompts show them, newest first."""
    return [
        {
            "when": f"{g.observed_at:%Y-%m-%d}",
            "outcome": g.outcome or "unfinished",
            "attempts": str(g.attempts),
            "decision": g.human or "none",
            "reasons": "; ".join(g.reasons)[:MAX_REASON_CHARS] or "(none)",
        }
        for g in earlier
    ]
