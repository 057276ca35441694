"""Progress of a long run, told as it happens: the flow run's URL first, then a line per
finished item. Plain log records on the ``autopilot.progress`` logger, with the numbers in
``extra={"progress": {...}}``, so the CLI can draw them (flows/commands/render.py) and Prefect
can collect them into the run's logs; nothing here needs a terminal. The run's progress
artifact in the UI is :class:`ProgressArtifact`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import cast
from uuid import UUID

PROGRESS = logging.getLogger("autopilot.progress")


def flow_run_url() -> str | None:
    """The running flow run's page in the Prefect UI, or None (no run, or no UI: ephemeral)."""
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_UI_URL

    if flow_run.get_id() is None or not PREFECT_UI_URL.value():
        return None
    return str(flow_run.ui_url)


def started(what: str) -> None:
    """The run started: its page in the UI when one serves it (the first line a user sees)."""
    from prefect.runtime import flow_run

    url = flow_run_url()
    where = url or "no Prefect UI (ephemeral server; set PREFECT_API_URL to watch it in one)"
    PROGRESS.info("%s: %s", flow_run.name or what, where, extra={"progress": {"url": url}})


def finished(item: str, outcome: str, done: int, total: int) -> None:
    """One item finished (`done` of `total` so far)."""
    PROGRESS.info(
        "[%d/%d] %s: %s",
        done,
        total,
        item,
        outcome,
        extra={"progress": {"done": done, "total": total, "item": item, "outcome": outcome}},
    )


#: Seconds between two updates of a progress artifact (each one is a call to the Prefect API;
#: a run of 300 files would otherwise make 300 of them, about 0.1 s of CPU each).
MIN_UPDATE_INTERVAL_S = 2.0


class ProgressArtifact:
    """A progress artifact of the running flow, updated as items finish: at most once per
    :data:`MIN_UPDATE_INTERVAL_S`, and always when the last item finishes (so it ends at 100)."""

    def __init__(
        self,
        key: str,
        description: str,
        total: int,
        *,
        interval_s: float = MIN_UPDATE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from prefect.artifacts import create_progress_artifact

        self.total = total
        self.updates = 0
        self._interval_s, self._clock = interval_s, clock
        self._last = clock()
        self.id = cast(UUID, create_progress_artifact(0.0, key=key, description=description))

    def advance(self, done: int) -> bool:
        """`done` of the total finished; True when the artifact was updated."""
        now = self._clock()
        if done < self.total and now - self._last < self._interval_s:
            return False
        from prefect.artifacts import update_progress_artifact

        update_progress_artifact(self.id, 100.0 * done / max(self.total, 1))
        self._last, self.updates = now, self.updates + 1
        return True
