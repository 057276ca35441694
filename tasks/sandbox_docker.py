"""The docker backend: the same limits as bwrap, enforced by the Docker engine.

:func:`docker_run_kwargs` is the pure part (what the container looks like); :class:`DockerRunner`
talks to the engine and fails fast with a :class:`SandboxError` when none is reachable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests
from docker.types import Ulimit

from tasks.errors import SandboxError
from tasks.sandbox_proc import RawResult, TailBuffer
from tasks.sandbox_runner import SANDBOX_HOME, Limits, Runner
from tasks.types import CommandResult

logger = logging.getLogger(__name__)

_MB = 1024 * 1024
#: Seconds to wait for the engine to answer before giving up on it.
CONNECT_TIMEOUT_S = 5


def docker_run_kwargs(
    *,
    image: str,
    argv: list[str],
    root: Path,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    timeout_s: float,
    user: str = "1000:1000",
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create(**kwargs)` (and `containers.run`).

    No network, read-only image file system, only the worktree (mounted at the same path) and a
    private size-bounded /tmp writable, memory, pids, CPU-time and file-size limits, an
    unprivileged user, no capabilities, no privilege escalation.
    """
    cpu, fsize = limits.cpu_for(timeout_s), limits.file_mb * _MB
    return {
        "image": image,
        "command": list(argv),
        "network_disabled": True,
        "read_only": True,
        "mem_limit": f"{limits.memory_mb}m",
        # Swap would let a hog run past mem_limit.
        "memswap_limit": f"{limits.memory_mb}m",
        "pids_limit": limits.max_processes,
        "tmpfs": {"/tmp": f"rw,nosuid,size={limits.tmp_mb}m"},
        "volumes": {str(root): {"bind": str(root), "mode": "rw"}},
        "working_dir": str(cwd),
        "environment": {"HOME": SANDBOX_HOME, "TMPDIR": "/tmp", **env},
        "user": user,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [
            Ulimit(name="cpu", soft=cpu, hard=cpu + 2),
            Ulimit(name="fsize", soft=fsize, hard=fsize),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "init": True,  # a real pid 1 reaps zombies and forwards the kill to the whole tree
        "detach": True,
        # Removed explicitly after the logs are read; auto_remove could race with that.
        "auto_remove": False,
    }


class DockerRunner(Runner):
    """Runs each command in a fresh container of the worker image (infra/)."""

    backend = "docker"

    def _setup(self) -> None:
        # Connecting is deferred to the first run, so building a runner stays cheap.
        self._client: Any = None

    def client(self) -> Any:
        """The engine client, connected on first use; SandboxError when no engine answers."""
        if self._client is None:
            import docker
            from docker.errors import DockerException

            try:
                client = docker.from_env(timeout=CONNECT_TIMEOUT_S)
                client.ping()
            except DockerException as exc:
                raise SandboxError(
                    f"docker engine unreachable ({_one_line(exc)}): start Docker, set "
                    "DOCKER_HOST, or choose sandbox backend bwrap"
                ) from None
            self._client = client
        return self._client

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        from docker.errors import DockerException, ImageNotFound

        client = self.client()
        kwargs = docker_run_kwargs(
            image=self.settings.docker_image,
            argv=argv,
            root=self.root,
            cwd=cwd,
            env=env,
            limits=self.limits,
            timeout_s=timeout_s,
        )
        image = kwargs.pop("image")
        start = time.monotonic()
        try:
            # create + start rather than run: run() would pull a missing image from a registry.
            container = client.containers.create(image, **kwargs)
        except ImageNotFound:
            raise SandboxError(
                f"docker image {image} not found: build it from infra/ first"
            ) from None
        except DockerException as exc:
            raise SandboxError(f"docker could not create the container: {_one_line(exc)}") from None
        try:
            container.start()
            timed_out = False
            try:
                status = container.wait(timeout=timeout_s)
                exit_code = int(status.get("StatusCode", 1))
            except requests.exceptions.RequestException:  # the wait outlived the timeout
                timed_out = True
                container.kill()
                exit_code = 137
            out, err = TailBuffer(self.limits.output_bytes), TailBuffer(self.limits.output_bytes)
            out.feed(container.logs(stdout=True, stderr=False))
            err.feed(container.logs(stdout=False, stderr=True))
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        except DockerException as exc:
            raise SandboxError(f"docker run failed: {_one_line(exc)}") from None
        finally:
            try:
                container.remove(force=True)
            except DockerException as exc:
                logger.warning("could not remove container: %s", _one_line(exc))
        raw = RawResult(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text() + ("\nout of memory (container OOM-killed)" if oom else ""),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )
        return self._result(argv, raw, timeout_s)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
