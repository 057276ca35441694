"""Run one process tree with a wall-clock timeout, bounded output capture and a reason.

Shared by the bwrap and none backends. The process starts in its own session (so its process
group can be killed as a whole) and, when available, in a per-run pids cgroup (so everything it
spawned can be killed, even what left the session). Output is kept bounded: only the last
`output_limit` bytes of each stream survive, so a test printing without end cannot eat memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from tasks.sandbox.cgroup import PidsCgroup

#: Default bound on captured bytes per stream.
OUTPUT_LIMIT = 1 << 20
_CHUNK = 1 << 16


@dataclass
class RawResult:
    """What the process did, before it is turned into a CommandResult."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    pids_limit_hit: bool = False


class TailBuffer:
    """Keeps the last `limit` bytes written, counting what it dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            return f"[... {self.dropped} earlier bytes dropped ...]\n{body}"
        return body


def _drain(stream: IO[bytes], buf: TailBuffer) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(_CHUNK):  # type: ignore[attr-defined]
            buf.feed(chunk)


def _kill_tree(proc: subprocess.Popen[bytes], cgroup: PidsCgroup | None) -> None:
    # The session leader's group holds everything that did not call setsid itself; the cgroup
    # holds the rest. bwrap's --die-with-parent and pid namespace cover the sandboxed case.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if cgroup is not None:
        cgroup.kill_all()


#: Longest uninterrupted wait for a process (see :func:`_wait_exit`).
_WAIT_SLICE_S = 0.5


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait until `proc` exits (True) or `timeout_s` passes (False), without reaping it."""
    # Popen.wait(timeout) polls with sleeps of up to 50 ms, which is most of the sandbox's
    # overhead on a short run; a pidfd wakes us the moment the process exits.
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout_s
    try:
        # In slices: a thread told to stop (a task at its time limit) stops within one.
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], min(left, _WAIT_SLICE_S))
            if ready:
                return True
        return False
    finally:
        os.close(fd)


def run_process(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    timeout_s: float,
    output_limit: int = OUTPUT_LIMIT,
    cgroup: PidsCgroup | None = None,
) -> RawResult:
    """Run `argv` to completion or until `timeout_s`, then make sure its whole tree is gone.

    Raises:
        OSError: the program could not be started (the caller turns it into a SandboxError).
    """
    if cgroup is not None:
        # Join the cgroup before exec, so not even the first fork escapes the limit. A shell
        # wrapper rather than preexec_fn: preexec_fn is unsafe in a threaded parent.
        argv = [
            "/bin/sh",
            "-c",
            'echo $$ > "$0" && exec "$@"',
            str(cgroup.procs_file),
            *argv,
        ]
    out, err = TailBuffer(output_limit), TailBuffer(output_limit)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True),
    ]
    for t in readers:
        t.start()
    timed_out = False
    try:
        timed_out = not _wait_exit(proc, timeout_s)
    finally:
        # Also after a normal exit: background children must not outlive the run.
        _kill_tree(proc, cgroup)
        proc.wait()
    duration = time.monotonic() - start
    for t in readers:
        # A grandchild that escaped every kill may still hold the pipe; do not wait for it.
        t.join(timeout=2.0)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    code = proc.returncode
    # Shell convention for deaths by signal, as bwrap reports them: 128 + signal number.
    exit_code = 128 - code if code < 0 else code
    return RawResult(
        exit_code=exit_code,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=duration,
        timed_out=timed_out,
        pids_limit_hit=cgroup.limit_hit() if cgroup is not None else False,
    )


_MEMORY = re.compile(
    r"MemoryError|NoMemoryError|failed to allocate memory|Cannot allocate memory|"
    r"std::bad_alloc|out of memory|ENOMEM",
    re.IGNORECASE,
)
_FORK = re.compile(
    r"Resource temporarily unavailable|Cannot fork|can't fork|fork: retry|EAGAIN.*fork|"
    r"BlockingIOError",
    re.IGNORECASE,
)
_FILE_SIZE = re.compile(r"File too large|EFBIG", re.IGNORECASE)
_DISK = re.compile(r"No space left on device|ENOSPC", re.IGNORECASE)
_NETWORK = re.compile(
    r"Connection refused|Network is unreachable|ECONNREFUSED|ENETUNREACH|"
    r"Failed to open TCP connection|Temporary failure in name resolution|"
    r"Name or service not known|getaddrinfo|SocketError|nodename nor servname",
    re.IGNORECASE,
)
_READ_ONLY = re.compile(r"Read-only file system|EROFS", re.IGNORECASE)


def classify(raw: RawResult, *, timeout_s: float, memory_mb: int, max_processes: int) -> str | None:
    """Why the run ended badly, in words, or None for an ordinary result (pass or test failure).

    Best effort: the kernel does not say which limit stopped a process, so this reads the exit
    signal, the cgroup's counters and well-known error messages, most specific first.
    """
    timeout = f"timeout after {timeout_s:g}s"
    if raw.timed_out:
        # Ruby retries a refused fork for about 100 s, so a fork bomb often ends as a timeout.
        if raw.pids_limit_hit:
            return f"process limit reached ({max_processes} processes), then {timeout}"
        return timeout
    if raw.exit_code == 0:
        return None
    signum = raw.exit_code - 128 if raw.exit_code > 128 else 0
    text = raw.stderr + "\n" + raw.stdout
    if raw.pids_limit_hit:
        return f"process limit reached ({max_processes} processes)"
    if signum == signal.SIGXCPU:
        return "CPU time limit reached"
    if signum == signal.SIGXFSZ or _FILE_SIZE.search(text):
        return "file size limit reached"
    if _MEMORY.search(text):
        return f"memory limit reached ({memory_mb} MB)"
    if _FORK.search(text):
        return "process limit reached"
    if _DISK.search(text):
        return "disk space limit reached (private /tmp is full)"
    if _NETWORK.search(text):
        return "network unreachable: the sandbox has no network"
    if _READ_ONLY.search(text):
        return "write outside the worktree refused: read-only file system"
    if signum == signal.SIGKILL:
        return "killed by SIGKILL (likely out of memory)"
    if signum and signum in signal.valid_signals():
        return f"killed by {signal.Signals(signum).name}"
    return None
