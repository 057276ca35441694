"""A per-run cgroup with a `pids.max` limit: the process limit that also holds for root.

Why a cgroup: RLIMIT_NPROC is counted per user and the kernel never enforces it for uid 0
(`copy_process` exempts INIT_USER), so a fork bomb run by root inside bwrap is not stopped by
it. The `pids` controller limits every process in the group, whatever its uid, and tells us
afterwards whether the limit was hit (`pids.events`). Both cgroup v1 (`/sys/fs/cgroup/pids`)
and v2 (a writable delegated subtree with `pids` enabled) are supported. When neither is
writable the caller falls back to RLIMIT_NPROC, which works for a non-root user inside a user
namespace.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, fs type, super options) for each cgroup mount, from /proc/self/mountinfo."""
    found: list[tuple[str, str, list[str]]] = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], tail[2].split(",")))
    return found


def _own_paths() -> dict[str, str]:
    """Our cgroup path per hierarchy: 'pids' for v1, '' for the v2 unified hierarchy."""
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return paths
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


@functools.cache
def pids_cgroup_parent() -> Path | None:
    """The directory under which per-run pids cgroups can be created, or None.

    Probed once per process by creating and removing a test group.
    """
    own = _own_paths()
    candidates: list[Path] = []
    for mount, fstype, opts in _mounts():
        if fstype == "cgroup" and "pids" in opts and "pids" in own:
            candidates.append(Path(mount) / own["pids"].lstrip("/"))
        elif fstype == "cgroup2" and "" in own:
            base = Path(mount) / own[""].lstrip("/")
            # v2: children get a pids.max only when our group delegates the controller.
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in enabled:
                candidates.append(base)
    for parent in candidates:
        probe = parent / f"autopilot-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / "pids.max").exists() and (probe / "cgroup.procs").exists()
        with contextlib.suppress(OSError):
            probe.rmdir()
        if usable:
            logger.debug("pids cgroup available under %s", parent)
            return parent
    return None


def _backoff(count: int) -> Iterator[float]:
    """`count` waits in seconds: from 1 ms, doubling, at most 50 ms each."""
    delay = 0.001
    for _ in range(count):
        yield delay
        delay = min(delay * 2, 0.05)


class PidsCgroup:
    """One throwaway cgroup limiting the number of processes of one command run."""

    def __init__(self, parent: Path, max_pids: int) -> None:
        self.path = parent / f"autopilot-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(f"{max_pids}\n")

    @property
    def procs_file(self) -> Path:
        """Writing a pid here moves that process (and its future children) into the group."""
        return self.path / "cgroup.procs"

    def limit_hit(self) -> bool:
        """Whether a fork was refused because the group reached pids.max."""
        try:
            text = (self.path / "pids.events").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip().isdigit():
                return int(value) > 0
        return False

    def kill_all(self) -> None:
        """SIGKILL every process left in the group (escaped sessions included)."""
        # Repeat: a process may fork between our read and our kill. Right after a normal exit
        # the group usually still lists processes the kernel is tearing down (the sandbox's
        # pid namespace going away): they are gone within a millisecond or two, so back off
        # from 1 ms rather than pay a flat 10 ms on every run (~0.8 s in all at most).
        for delay in _backoff(20):
            pids = self._pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(delay)

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        """Kill what is left and delete the group; it stays behind only if that keeps failing."""
        self.kill_all()
        # Killed processes leave the group once reaped, usually within a millisecond or two:
        # back off from 1 ms so a short run does not pay a long sleep (~3 s in all).
        for delay in _backoff(70):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(delay)
        logger.warning("could not remove cgroup %s", self.path)
