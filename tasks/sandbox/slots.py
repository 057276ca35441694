"""How many sandboxed commands run at once in this process.

A nightly works on many files at once (16 by default) so that model latency overlaps, and each
file's commands used to start as soon as they were ready: sixteen test processes on two cores.
Measured on the 60-file bench, that used 30% more CPU for the same work than two at a time
(switching between them, each one's caches lost), and the run took 30% longer. Every sandboxed
command of the process therefore takes a slot first; a file job waiting for one waits, as it
would have waited for a core. The command's own timeout starts once it runs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["command_slot", "default_slots"]

_SEMAPHORES: dict[int, threading.BoundedSemaphore] = {}
_LOCK = threading.Lock()


def default_slots() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _semaphore(slots: int) -> threading.BoundedSemaphore:
    with _LOCK:
        if slots not in _SEMAPHORES:
            _SEMAPHORES[slots] = threading.BoundedSemaphore(slots)
        return _SEMAPHORES[slots]


@contextmanager
def command_slot(slots: int | None) -> Iterator[None]:
    """Hold one of `slots` process-wide places (None: :func:`default_slots`) for the block."""
    semaphore = _semaphore(slots if slots is not None else default_slots())
    with semaphore:
        yield
