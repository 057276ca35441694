"""What a repair run keeps and shows: its typed states archived under unique, numbered names,
and its artifacts in the Prefect UI (the groups' table and the markdown summary)."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.audit import artifact_key
from tasks.core.errors import ArchiveError
from tasks.keep.archive import RunArchive
from tasks.repair.state import GroupState, RepairState
from tasks.repair.summary import summary_markdown

log = logging.getLogger(__name__)


class Saver:
    """Archives states under unique, numbered names (archive objects are immutable)."""

    def __init__(self, archive: RunArchive, after: int = 0) -> None:
        """`after`: the last number already archived (a run resumed after a suspension)."""
        self.archive = archive
        self._counter = itertools.count(after + 1)
        self.calls_key = f"model-calls-{after:03d}.json" if after else "model-calls.json"

    def put(self, relpath: str, data: Any) -> None:
        try:
            self.archive.put_json(relpath, data)
        except ArchiveError as exc:
            # The repair goes on; the operator sees the warning.
            log.warning("archive: %s", exc)

    def next_number(self) -> int:
        """The number the next state would get (a worker numbers a group's states from it)."""
        n = next(self._counter)
        self._counter = itertools.count(n)
        return n

    def skip_past(self, last: int) -> None:
        """Number every later state after `last` (the highest a worker used)."""
        n = next(self._counter)
        self._counter = itertools.count(max(n, last + 1))

    def group(self, state: GroupState, step: str) -> None:
        n = next(self._counter)
        self.put(f"groups/{state.group.id}/{n:03d}-{step}.json", state.model_dump(mode="json"))

    def run(self, state: RepairState, label: str) -> None:
        n = next(self._counter)
        self.put(f"state-{n:03d}-{label}.json", state.model_dump(mode="json"))


def publish_repair(state: RepairState, name: str) -> None:
    """The groups' table and the summary, as the run's artifacts."""
    rows = []
    for g in state.groups:
        rows.append(
            {
                "group": g.group.id,
                "tests": len(g.group.tests),
                "outcome": g.outcome,
                "category": g.category,
                "attempts": len(g.attempts),
                "tokens": g.tokens,
                "signature": g.group.signature,
            }
        )
    key = artifact_key("post-merge", name)
    create_table_artifact(rows, key=key, description=f"Repair of {name}")
    create_markdown_artifact(summary_markdown(state, name), key=f"{key}-summary")
