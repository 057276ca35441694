"""Where a run's servers run: host processes, or containers next to the docker sandbox's.

A server (:mod:`tasks.services.postgres`, :mod:`tasks.services.redis`) asks its launcher to
start its program and to run its client commands; everything else (the private directory, the
socket, one database per job, the variables a test gets) is the same either way.

- :class:`HostLauncher`: a process of this machine, as the server's identity (``setpriv`` when
  Autopilot runs as root).
- :class:`ContainerLauncher`: a container of the worker image (the docker backend's
  ``sandbox.docker_image``, which has PostgreSQL and Redis), with no network at all: the
  run's private directory is mounted at the same path, so the server's Unix socket is the
  same file for the docker sandbox's containers (which mount ``sock/`` read-only, as bwrap
  shows it) and for this process. It runs as the server's identity (a passwd file of the run
  names it), with a read-only image, no capability and no privilege escalation; the engine
  removes it when it stops, and a killed run's reaper stops it like a host server (its
  processes work in the run's directory).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from tasks.services.binaries import Server, ServiceError
from tasks.services.identity import Identity, RunDirs
from tasks.services.procs import stop_server

#: Where the worker image (Debian bookworm's packages) has the servers.
IMAGE_PROGRAMS = {
    "postgres": "/usr/lib/postgresql/15/bin/postgres",
    "redis": "/usr/bin/redis-server",
}
LABEL = "org.test-autopilot.services"
Completed = subprocess.CompletedProcess[str]


class Handle(Protocol):
    """A started server."""

    @property
    def pid(self) -> int:
        """The server's process id on this machine (a container's as the host sees it)."""
        ...

    def poll(self) -> int | None: ...

    def stop(self, sig: signal.Signals, grace_s: float) -> None: ...


class Launcher(Protocol):
    """Starts a server's program and runs its client commands."""

    def start(self, argv: list[str], *, log: Path, cwd: Path) -> Handle: ...

    def run(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, as_server: bool = False
    ) -> Completed: ...


def clean_env() -> dict[str, str]:
    """PATH, LANG and nothing of the host's PG* variables or secrets."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "TZ": "UTC"}


class _Process:
    def __init__(self, proc: subprocess.Popen[bytes], workdir: Path) -> None:
        self.proc, self.workdir = proc, workdir

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, sig: signal.Signals, grace_s: float) -> None:
        stop_server(self.proc, str(self.workdir), sig, grace_s)


class HostLauncher:
    """Servers as processes of this machine."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    def start(self, argv: list[str], *, log: Path, cwd: Path) -> Handle:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                self.identity.argv(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=str(cwd),
                env=clean_env(),
                start_new_session=True,
            )
        return _Process(proc, cwd)

    def run(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, as_server: bool = False
    ) -> Completed:
        """`argv` here: as the server's identity (`as_server`, initdb) or as Autopilot."""
        return subprocess.run(
            self.identity.argv(argv) if as_server else argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**clean_env(), **env},
        )


class _Container:
    def __init__(self, container: Any, log: Path) -> None:
        self.container, self.log = container, log

    @property
    def pid(self) -> int:
        self.container.reload()
        return int((self.container.attrs.get("State") or {}).get("Pid") or 0)

    def poll(self) -> int | None:
        from docker.errors import NotFound

        try:
            self.container.reload()
        except NotFound:  # stopped and removed by the engine
            return -1
        state = self.container.attrs.get("State") or {}
        return None if state.get("Running") else int(state.get("ExitCode") or -1)

    def stop(self, sig: signal.Signals, grace_s: float) -> None:
        from docker.errors import DockerException

        with contextlib.suppress(DockerException):
            self.container.kill(signal=int(sig))
        deadline = time.monotonic() + grace_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(DockerException):
            self.container.remove(force=True)


class ContainerLauncher:
    """Servers as containers of `image`, next to the docker sandbox's containers."""

    def __init__(
        self, image: str, identity: Identity, name: str, dirs: RunDirs | None = None
    ) -> None:
        self.image, self.identity, self.name, self.dirs = image, identity, name, dirs
        self._started: _Container | None = None
        self._client: Any = None

    def at(self, dirs: RunDirs) -> ContainerLauncher:
        """This launcher for the run's private directory `dirs`."""
        return ContainerLauncher(self.image, self.identity, self.name, dirs)

    def server(self) -> Server:
        """The image's server (its version read from the image)."""
        from tasks.services.binaries import parse_version

        program = IMAGE_PROGRAMS[self.name]
        done = self._one_off([program, "--version"], timeout_s=120)
        version = parse_version(done.stdout)
        if done.returncode != 0 or version is None:
            why = (done.stderr or done.stdout).strip()[:200]
            raise ServiceError(f"[services] {self.name}: not in the image {self.image}: {why}")
        return Server(self.name, program, version)

    def client(self) -> Any:
        if self._client is None:
            import docker
            from docker.errors import DockerException

            try:
                self._client = docker.from_env(timeout=30)
                self._client.ping()
            except DockerException as exc:
                raise ServiceError(f"services: docker engine unreachable: {exc}") from None
        return self._client

    def _passwd(self) -> Path | None:
        """A passwd file naming the server's identity (initdb needs a user name)."""
        if self.dirs is None:
            return None
        path = self.dirs.base / "passwd"
        if not path.exists():
            uid, gid = self.identity.uid, self.identity.gid
            path.write_text(
                f"root:x:0:0::/root:/bin/false\nautopilot:x:{uid}:{gid}::/tmp:/bin/false\n"
            )
            path.chmod(0o644)
        return path

    def _kwargs(self, argv: list[str], cwd: Path) -> dict[str, Any]:
        volumes: dict[str, dict[str, str]] = {}
        passwd = self._passwd()
        if self.dirs is not None and passwd is not None:
            base = str(self.dirs.base)
            volumes[base] = {"bind": base, "mode": "rw"}
            volumes[str(passwd)] = {"bind": "/etc/passwd", "mode": "ro"}
        return {
            "entrypoint": argv,
            "user": f"{self.identity.uid}:{self.identity.gid}",
            "working_dir": str(cwd),
            "network_mode": "none",  # not even a loopback shared with anything else
            "read_only": True,
            "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
            "volumes": volumes,
            "environment": {"LANG": "C.UTF-8", "TZ": "UTC"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "init": True,
            "labels": {LABEL: str(self.dirs.base) if self.dirs else ""},
        }

    def start(self, argv: list[str], *, log: Path, cwd: Path) -> Handle:
        from docker.errors import DockerException

        try:
            # The server's output goes to its log in the run's directory, as on the host.
            logged = ["/bin/sh", "-c", 'exec "$@" >>"$0" 2>&1', str(log), *argv]
            container = self.client().containers.create(
                self.image, detach=True, auto_remove=True, **self._kwargs(logged, cwd)
            )
            container.start()
        except DockerException as exc:
            raise ServiceError(f"{self.name}: container did not start: {exc}") from None
        self._started = _Container(container, log)
        return self._started

    def run(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, as_server: bool = False
    ) -> Completed:
        """`argv` in the server's container (a one-off container before it started), always
        as the server's identity."""
        from docker.errors import DockerException

        if self._started is None:
            return self._one_off(argv, timeout_s=timeout_s)
        try:
            code, (out, err) = self._started.container.exec_run(
                argv, environment=env, demux=True, user=f"{self.identity.uid}:{self.identity.gid}"
            )
        except DockerException as exc:
            return subprocess.CompletedProcess(argv, 1, "", str(exc))
        return subprocess.CompletedProcess(argv, code, (out or b"").decode(), (err or b"").decode())

    def _one_off(self, argv: list[str], *, timeout_s: float) -> Completed:
        from docker.errors import DockerException

        try:
            container = self.client().containers.create(
                self.image, detach=True, **self._kwargs(argv, Path("/"))
            )
        except DockerException as exc:
            raise ServiceError(f"{self.name}: image {self.image}: {exc}") from None
        try:
            container.start()
            code = int(container.wait(timeout=timeout_s).get("StatusCode", 1))
            out = container.logs(stdout=True, stderr=False).decode()
            err = container.logs(stdout=False, stderr=True).decode()
        except Exception as exc:  # the engine or the wait: one line for the caller
            return subprocess.CompletedProcess(argv, 1, "", str(exc))
        finally:
            with contextlib.suppress(DockerException):
                container.remove(force=True)
        return subprocess.CompletedProcess(argv, code, out, err)
