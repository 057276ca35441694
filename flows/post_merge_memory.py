"""The repair's use of the run history: quarantined tests out of their groups, and the shards of
one commit merged (a signature another shard took is not repaired twice).

Shards: separate CI jobs of one commit each start ``autopilot repair`` with their own report.
Every run given reports claims its groups' signatures for (repository, commit) in one
transaction of the store; a signature a run of the same commit claimed within
``history.shard_window_s`` with other reports stays that run's, and this run lists the group
under ``merged`` (with the run that repairs it) instead of repairing it. An older claim, or one
made with the same reports (the same run tried again: a person retrying after a rejection), is
taken over. The run becomes a shard of the commit's first run within the window
(``shard_of``): the trend counts them as one run. A run without reports (the whole suite, in the
sandbox) is never a shard.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from flows.memory import Memory
from tasks.core.config import Settings
from tasks.history.records import case_key, utc_now
from tasks.repair.memory import quarantine_groups
from tasks.repair.state import FailureGroup, GroupState, MergedGroup, RepairState


class _RunLike(Protocol):
    @property
    def run_id(self) -> str: ...

    @property
    def commit(self) -> str: ...


def remembered_groups(
    groups: list[FailureGroup], memory: Memory, run: _RunLike
) -> list[GroupState]:
    """The groups' states with the quarantined tests moved into flaky groups of their own (this
    run's own observations count: a test failing in one report and passing in another)."""
    keys = [case_key(t) for g in groups for t in g.tests]
    found = memory.quarantine(memory.observed, run.run_id, run.commit, keys)
    memory.flagged.update(found)
    return quarantine_groups(groups, found)


def reports_digest(reports: list[str]) -> str:
    """The digest of a run's reports' contents (the same run tried again has the same)."""
    parts = []
    for path in reports:
        try:
            parts.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
        except OSError:
            parts.append(f"unreadable:{path}")
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def with_memory(state: RepairState, memory: Memory, settings: Settings, reports: list[str]) -> None:
    """Claim the groups' signatures for the run's commit; groups another shard took move to
    ``state.merged``, and the run names the first run of the commit (``state.shard_of``).

    Only a run given reports is a shard: a run of the whole suite in the sandbox, or a run
    given the same reports again (a retry), repairs what it finds."""
    window = settings.history.shard_window_s
    if not memory.available or window <= 0 or not reports:
        return
    digest = reports_digest(reports)
    signatures = [g.group.signature for g in state.groups]
    nothing: tuple[dict[str, str], str | None] = ({}, None)
    owners, first = memory.ask(
        lambda s: s.claim(
            memory.repo, state.base_commit, signatures, state.run_id, window, utc_now(), digest
        ),
        nothing,
    )
    state.shard_of = first
    kept: list[GroupState] = []
    for g in state.groups:
        owner = owners.get(g.group.signature, state.run_id)
        if owner == state.run_id:
            kept.append(g)
            continue
        tests = [t.id for t in g.group.tests]
        state.merged.append(
            MergedGroup(id=g.group.id, signature=g.group.signature, tests=tests, run_id=owner)
        )
    state.groups = kept
