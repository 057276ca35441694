"""Progress of a long run, told as it happens: the flow run's URL first, then a line per
finished item. Plain log records on the ``autopilot.progress`` logger, with the numbers in
``extra={"progress": {...}}``, so the CLI can draw them (flows/commands/render.py) and Prefect
can collect them into the run's logs; nothing here needs a terminal.
"""

from __future__ import annotations

import logging

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
