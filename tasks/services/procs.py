"""Processes by where they work: a server and its children all run inside its data directory.

PostgreSQL's backends put themselves in their own sessions and Redis may fork, so neither a
process group nor a parent pid finds them all; their working directory does (PostgreSQL and
Redis both change into their data directory). This is what cleanup and the tests use to say
"nothing is left running".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def processes_in(directory: str) -> list[int]:
    """Pids of the processes whose working directory is `directory` or below it."""
    where = os.path.realpath(directory)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if _within(cwd.removesuffix(" (deleted)"), where):
            found.append(int(entry))
    return found


def kill_in(directory: str, *, grace_s: float = 5.0) -> list[int]:
    """SIGTERM every process working in `directory`, SIGKILL what is left after `grace_s`;
    returns the pids that were found."""
    pids = processes_in(directory)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_in(directory):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while processes_in(directory) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not processes_in(directory):
            break
    return pids


def stop_server(
    proc: subprocess.Popen[bytes] | None, data: str, sig: signal.Signals, grace_s: float
) -> None:
    """Ask a server to stop with `sig`, wait `grace_s`, then kill whatever still works in its
    data directory `data` (its children included) and reap it."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.kill(proc.pid, sig)
            proc.wait(timeout=grace_s)
    kill_in(data, grace_s=2.0)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
