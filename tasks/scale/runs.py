"""A run's context on whichever process its jobs land: the flow's own, or a worker's.

The flow enters :func:`tasks.audit.prepared.prepared_run` once and registers the run here
(:func:`hosting`). A job calls :func:`on_worker` with the :class:`ShippedRun` it carries:

- in the flow's process (the thread runner, or Dask threads) it gets the flow's own context
  and settings: nothing is made twice;
- in another process (a Dask worker) the first job of the run makes the run's context there,
  once: :func:`prepared_run` on the same project, which finds the prepared environment by its
  key (a shared ``$AUTOPILOT_HOME``) or builds it from the same lock files, starts the
  declared services on this worker's own servers and loads the schema. Every later job of the
  run on this worker re-uses it, each on its own database (``job_context``).

A worker's run is closed (its services stopped and removed) when the flow asks every worker
(:func:`release_run`, through the Dask client at the end of the fan-out), when it has been idle
for :data:`IDLE_S`, or when the worker process exits; if the worker is killed, the services'
reaper removes them.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tasks.audit.prepared import prepared_run
from tasks.core.config import Settings
from tasks.core.run_context import RunContext, current_run_context, run_context
from tasks.scale.secrets import SecretRefs, resolved_settings

log = logging.getLogger(__name__)

#: A worker's run with no job for this long is closed (the flow may have died without asking).
IDLE_S = 900.0


class ShippedRun(BaseModel):
    """What a job carries of its run, as plain data: enough to make the run's context on any
    worker that sees the project at the same path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str = Field(description="The run's own id (one per flow run)")
    toolchain: str
    project: Path = Field(description="The project inside the run's worktree")
    worktree: Path
    secrets: SecretRefs = Field(default_factory=SecretRefs)


@dataclass
class WorkerRun:
    """One run's context in this process."""

    token: str
    context: RunContext
    problem: str | None
    #: The flow's own settings (secrets included) when the flow's process hosts the run.
    settings: Settings | None = None
    #: What closes a run this process made; None for the flow's own.
    stack: contextlib.ExitStack | None = None
    ctx: contextvars.Context | None = None
    users: int = 0
    timer: threading.Timer | None = field(default=None, repr=False)

    @property
    def made_here(self) -> bool:
        return self.stack is not None


_RUNS: dict[str, WorkerRun] = {}
_LOCK = threading.Lock()
_MAKING: dict[str, threading.Lock] = {}


def open_runs() -> dict[str, bool]:
    """The runs this process holds: token -> made here (a worker's) or hosted (the flow's)."""
    with _LOCK:
        return {t: r.made_here for t, r in _RUNS.items()}


@contextlib.contextmanager
def hosting(token: str, settings: Settings, problem: str | None) -> Iterator[None]:
    """Register the flow's run (entered in the current context) for its jobs in this process."""
    run = WorkerRun(token, current_run_context(), problem, settings=settings)
    with _LOCK:
        _RUNS[token] = run
    try:
        yield
    finally:
        with _LOCK:
            if _RUNS.get(token) is run:
                del _RUNS[token]


@contextlib.contextmanager
def on_worker(shipped: ShippedRun, settings: Settings) -> Iterator[tuple[Settings, str | None]]:
    """The body inside the run's context: (the job's settings, its secrets read again; the
    run's one-line problem, None when ready).

    Raises:
        ConfigError: a secret the job needs is not available on this worker.
    """
    run = _acquire(shipped, settings)
    try:
        job_settings = resolved_settings(settings, shipped.secrets, run.settings)
        with run_context(run.context):
            yield job_settings, run.problem
    finally:
        _release_use(run)


def _acquire(shipped: ShippedRun, settings: Settings) -> WorkerRun:
    with _LOCK:
        making = _MAKING.setdefault(shipped.token, threading.Lock())
    with making:  # one job makes the run; the others of this worker wait for it
        with _LOCK:
            run = _RUNS.get(shipped.token)
            if run is not None:
                run.users += 1
                if run.timer is not None:
                    run.timer.cancel()
                    run.timer = None
                return run
        run = _make(shipped, settings)
        with _LOCK:
            run.users += 1
            _RUNS[shipped.token] = run
        return run


def _make(shipped: ShippedRun, settings: Settings) -> WorkerRun:
    """Prepare the run on this worker, in a context of its own (it outlives the job that
    made it, and is closed from whichever thread releases it)."""
    log.info("run %s: making its environment and services on this worker", shipped.token[:8])
    if not shipped.project.is_dir():
        problem = (
            f"the run's project {shipped.project} is not visible on this worker "
            f"({socket.gethostname()}): the flow's worktrees (its TMPDIR) and AUTOPILOT_HOME "
            "must be on a file system every worker mounts at the same path"
        )
        return WorkerRun(shipped.token, RunContext(), problem, stack=contextlib.ExitStack(),
                         ctx=contextvars.copy_context())  # fmt: skip
    ctx = contextvars.copy_context()
    stack = contextlib.ExitStack()
    ready = ctx.run(
        stack.enter_context,
        prepared_run(settings, shipped.project, shipped.worktree, shipped.toolchain),
    )
    context = ctx.run(current_run_context)
    if ready.problem:
        log.warning("run %s on this worker: %s", shipped.token[:8], ready.problem)
    return WorkerRun(shipped.token, context, ready.problem, stack=stack, ctx=ctx)


def _release_use(run: WorkerRun) -> None:
    with _LOCK:
        run.users -= 1
        if run.made_here and run.users == 0 and _RUNS.get(run.token) is run:
            run.timer = threading.Timer(IDLE_S, _close_if_idle, args=(run.token,))
            run.timer.daemon = True
            run.timer.start()


def _close_if_idle(token: str) -> None:
    with _LOCK:
        run = _RUNS.get(token)
        if run is None or run.users or not run.made_here:
            return
    log.info("run %s: idle for %.0f s on this worker; closing it", token[:8], IDLE_S)
    release_run(token)


def release_run(token: str) -> str:
    """Close the run `token` made in this process (its services stopped and removed): what
    the flow asks every worker at the end. A run still in use waits for its jobs; the flow's
    own run is never closed here. Returns one word for the caller's log."""
    with _LOCK:
        making = _MAKING.get(token)
    with making or contextlib.nullcontext():
        with _LOCK:
            run = _RUNS.get(token)
            if run is None or not run.made_here:
                _MAKING.pop(token, None)
                return "none"
            if run.users:
                return "busy"
            del _RUNS[token]
            _MAKING.pop(token, None)
            if run.timer is not None:
                run.timer.cancel()
        _close(run)
    return "closed"


def _close(run: WorkerRun) -> None:
    assert run.stack is not None and run.ctx is not None
    try:
        run.ctx.run(run.stack.close)
    except Exception as exc:  # the worker goes on; the reaper removes what is left
        log.warning("run %s: closing its services failed: %s", run.token[:8], exc)


@atexit.register
def _close_all() -> None:
    with _LOCK:
        mine = [r for r in _RUNS.values() if r.made_here]
        _RUNS.clear()
    for run in mine:
        _close(run)
