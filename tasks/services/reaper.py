"""The safety net of one run's services: a small process that outlives its parent.

``python -I reaper.py <run-dir>`` is started, in a session of its own, by the process that
starts the servers, with a pipe on its stdin. It waits for that pipe to close. The parent
closes it after its own cleanup; if the parent died instead (SIGKILL, a crash, an operator
cancelling the job), the pipe closes all the same, and the reaper kills every process still
working in the run's directory and removes the directory. Either way nothing is left running
and nothing is left on disk.

Standard library only, no import of Autopilot: it must start fast and work from any
interpreter.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _pids_in(directory: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd").removesuffix(" (deleted)")
            except OSError:
                continue
            if _within(cwd, directory):
                found.append(int(entry))
    return found


def reap(directory: str) -> None:
    """Kill what works in `directory` (TERM, then KILL), then remove it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_in(directory):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while _pids_in(directory) and time.monotonic() < deadline:
            time.sleep(0.05)
    shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    directory = os.path.realpath(sys.argv[1])
    if not os.path.basename(directory).startswith("ap-svc-"):
        return 2  # never anything but a run directory
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    if os.path.isdir(directory):
        reap(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
