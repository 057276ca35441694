"""What every sandboxed command of the current run needs from outside its worktree.

A flow that prepared an environment (``tasks.envs``) or started services
(``tasks.services``) enters :func:`run_context` once; every sandbox runner made inside it
shows the directories read-only and sets the variables on each command, and every toolchain
made inside it uses the environment's interpreter. A file job enters :func:`job_context` to get
its own database. Context variables: the threads of Prefect's task runner inherit them, and one
run never sees another's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol


class PreparedLike(Protocol):
    """A prepared environment as a toolchain sees it (``tasks.envs.PreparedEnv``)."""

    stack: str
    #: The environment's directory (a stack without an interpreter finds its packages there).
    path: str
    interpreter: str | None


@dataclass(frozen=True)
class RunContext:
    """The run's read-only directories, fixed variables, environment and per-job variables."""

    dirs: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    prepared: PreparedLike | None = None
    #: A file job's own variables (its database), made once per job name.
    for_job: Callable[[str], Mapping[str, str]] | None = None


_EMPTY = RunContext()
_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "autopilot_run_context", default=None
)


def current_run_context() -> RunContext:
    """The context of the code running now (empty outside any run)."""
    return _CURRENT.get() or _EMPTY


@contextlib.contextmanager
def run_context(context: RunContext) -> Iterator[RunContext]:
    """Run the body with `context` added to the current one (its variables win)."""
    outer = current_run_context()
    merged = RunContext(
        dirs=tuple(dict.fromkeys((*outer.dirs, *context.dirs))),
        env={**outer.env, **context.env},
        prepared=context.prepared or outer.prepared,
        for_job=context.for_job or outer.for_job,
    )
    token = _CURRENT.set(merged)
    try:
        yield merged
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def job_context(job: str) -> Iterator[RunContext]:
    """The body of file job `job`, with its own variables when the run has per-job ones."""
    outer = current_run_context()
    env = outer.for_job(job) if outer.for_job is not None else {}
    with run_context(RunContext(env=env)) as ctx:
        yield ctx
