"""Test helper: a real multi-process Dask cluster on loopback, as an operator starts one.

``dask scheduler`` and one ``dask worker`` process per worker (each with its nanny, in a
session of its own so a test can kill one whole worker with SIGKILL), started with the
environment the test gives (a real Prefect server's ``PREFECT_API_URL``: worker processes
cannot use the ephemeral server). Everything is stopped at the end, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

DASK = Path(sys.executable).with_name("dask")


@dataclass
class Cluster:
    """The scheduler's address and the workers' processes (name -> Popen)."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: Path = Path()
    threads: int = 1

    def kill(self, name: str) -> None:
        """SIGKILL to the worker's whole process group (nanny and worker): a lost machine."""
        proc = self.workers[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def command(self, name: str) -> list[str]:
        """The command line an operator types for worker `name`."""
        return [str(DASK), "worker", self.address, "--nthreads", str(self.threads), "--name", name]

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"== {path.name}\n" + "\n".join(text))
        return "\n".join(out)


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dask scheduler exited ({proc.returncode})")
        if path.exists():
            try:
                return dict(json.loads(path.read_text()))
            except ValueError:
                pass
        time.sleep(0.2)
    raise RuntimeError("dask scheduler did not start")


def _wait_workers(address: str, count: int, timeout_s: float) -> None:
    from distributed import Client

    with Client(address, timeout=timeout_s) as client:
        client.wait_for_workers(count, timeout=timeout_s)


@contextmanager
def dask_cluster(
    workdir: Path,
    env: Mapping[str, str],
    workers: int = 2,
    timeout_s: float = 120,
    threads: int = 1,
) -> Iterator[Cluster]:
    """Start ``dask scheduler`` and `workers` ``dask worker`` processes (`threads` each) on
    loopback."""
    workdir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    full = {**os.environ, **env}

    def start(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        out = (workdir / log).open("wb")
        proc = subprocess.Popen(
            argv, env=full, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        procs.append(proc)
        return proc

    file = workdir / "scheduler.json"
    try:
        scheduler = start(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--dashboard-address", ":0", "--scheduler-file", str(file)],
            "scheduler.log",
        )  # fmt: skip
        address = _wait_for(file, scheduler, timeout_s)["address"]
        cluster = Cluster(address, scheduler, logs=workdir, threads=threads)
        for i in range(1, workers + 1):
            name = f"w{i}"
            argv = [*cluster.command(name), "--host", "127.0.0.1", "--dashboard-address", ":0"]
            cluster.workers[name] = start(argv, f"{name}.log")
        _wait_workers(address, workers, timeout_s)
        yield cluster
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
