"""A flow's jobs on workers: what they carry, and the end of the run on every worker.

The nightly's file jobs and the repair's groups go to the flow's task runner: threads of this
process, or Dask workers in other processes and on other machines. Each job carries its run as
plain data (:class:`tasks.scale.ShippedRun`) and its settings without a secret value; the
worker makes the run's environment and services once (:func:`tasks.scale.on_worker`). When the
fan-out is over the flow asks every Dask worker to close what it made for the run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tasks.core.config import Settings
from tasks.scale import ShippedRun, hosting, release_run, shipped_settings

log = logging.getLogger(__name__)


@contextmanager
def shipping(
    token: str,
    settings: Settings,
    problem: str | None,
    toolchain: str,
    project: Path,
    worktree: Path,
) -> Iterator[tuple[ShippedRun, Settings]]:
    """Inside the run's prepared context: register it for this process's jobs, and give what
    each job carries (the run, the settings without secrets); on leaving, every Dask worker of
    the flow's task runner closes what it made for the run."""
    shipped_as, refs = shipped_settings(settings)
    run = ShippedRun(
        token=token, toolchain=toolchain, project=project, worktree=worktree, secrets=refs
    )
    try:
        with hosting(token, settings, problem):
            yield run, shipped_as
    finally:
        release_on_workers(token)


def _task_runner() -> object | None:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return ctx.task_runner if ctx is not None else None


def on_dask() -> bool:
    """The current flow's tasks go to a Dask cluster (maybe other processes)."""
    return type(_task_runner()).__name__ == "DaskTaskRunner"


def release_on_workers(token: str) -> dict[str, str]:
    """Ask every worker of the current flow's Dask task runner to close run `token` (nothing
    to do on threads). Never raises: a worker that cannot be asked closes the run when idle,
    and its services' reaper when it dies. Returns worker -> what it did."""
    try:
        if not on_dask():
            return {}
        client = _task_runner().client  # type: ignore[attr-defined]
        done: dict[str, str] = client.run(release_run, token)
    except Exception as exc:  # the run's result never depends on this clean-up
        log.warning("closing run %s on the Dask workers: %s", token[:8], exc)
        return {}
    closed = sorted(w for w, what in done.items() if what == "closed")
    if closed:
        log.info("run %s closed on %d worker(s): %s", token[:8], len(closed), ", ".join(closed))
    return done


def on_task_runner(flow: Any, dask: str | None, workers: int) -> Any:
    """`flow` on threads (`workers` at once), or on a Dask cluster (`dask`: a scheduler's
    address, or "local" for a cluster of threads in this process)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    # Any: Prefect's runner generics do not line up under mypy (ThreadPoolTaskRunner[Never]).
    runner: Any
    if not dask:
        runner = ThreadPoolTaskRunner(max_workers=workers)
        return flow.with_options(task_runner=runner)
    from prefect_dask import DaskTaskRunner

    if dask == "local":
        # Threads in this process: Dask worker processes cannot reach Prefect's ephemeral
        # server (DESIGN.md "Facts verified").
        runner = DaskTaskRunner(
            cluster_kwargs={"processes": False, "n_workers": 1, "threads_per_worker": workers}
        )
    else:
        runner = DaskTaskRunner(address=dask)
    return flow.with_options(task_runner=runner)
