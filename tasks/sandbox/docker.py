"""The docker backend: the same limits as bwrap, enforced by the Docker engine.

Each command runs in a fresh container of the worker image (``infra/Dockerfile``): no network,
a read-only root file system, a private size-bounded /tmp, memory and pids limits in the
container's cgroup, the same per-process rlimits as bwrap (``prlimit`` inside the container), no
capabilities, no privilege escalation, and the environment cleared to an allow-list. Only the
worktree (read-write, at the same path), the toolchain's own directories (the interpreter that
runs a Python project's tests, when it lives outside the image's system directories) and the
paths a project declares (``[sandbox] read_only``) are mounted, read-only but the worktree.

The runner and the engine must see the worktree at the same path: run it on the machine of the
engine, or in a container that mounts the worktrees' directory at the same path.

:func:`docker_run_kwargs` is the pure part (what the container looks like); :class:`DockerRunner`
talks to the engine and fails fast with a :class:`SandboxError` when none is reachable.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import requests
from docker.types import Ulimit

from tasks.core.errors import SandboxError
from tasks.core.host_paths import declared_reason, forbidden_reason
from tasks.core.types import CommandResult
from tasks.sandbox.base import DEFAULT_PATH, SANDBOX_HOME, Limits, Runner
from tasks.sandbox.proc import RawResult, TailBuffer

logger = logging.getLogger(__name__)

_MB = 1024 * 1024
#: Seconds to wait for the engine to answer before giving up on it.
CONNECT_TIMEOUT_S = 5
#: Directories that belong to the image, never replaced by the host's.
SYSTEM_DIRS = frozenset(
    {"/", "/usr", "/usr/local", "/usr/lib", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt"}
    | {"/var", "/home", "/root", "/tmp", "/srv", "/proc", "/sys", "/dev", "/run"}
)
#: Runs the command with exactly the allow-listed environment and an existing HOME.
_LAUNCH = 'mkdir -p "$HOME" && exec "$@"'
_NOT_FOUND = re.compile(r"^sh: \d+: exec: (.+): not found$", re.MULTILINE)


def launcher(
    argv: Sequence[str], env: Mapping[str, str], limits: Limits, timeout_s: float
) -> list[str]:
    """The container's command: `env -i` (nothing of the image's environment but what is
    given), the per-process rlimits bwrap applies, then `argv` through a shell that makes HOME."""
    pairs = [f"{k}={v}" for k, v in env.items()]
    return [
        "/usr/bin/env",
        "-i",
        *pairs,
        "prlimit",
        *limits.prlimit_args(timeout_s, nproc=False),
        "--",
        "/bin/sh",
        "-c",
        _LAUNCH,
        "sh",
        *argv,
    ]


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
    read_only: Sequence[str] = (),
    writable: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create(**kwargs)`.

    No network, read-only image file system, only the worktree (mounted at the same path) and a
    private size-bounded /tmp writable, `read_only` host paths shown read-only at the same
    place, memory, pids, CPU-time and file-size limits, an unprivileged user (the worktree's
    owner), no capabilities, no privilege escalation.
    """
    cpu, fsize = limits.cpu_for(timeout_s), limits.file_mb * _MB
    volumes: dict[str, dict[str, str]] = {
        path: {"bind": path, "mode": "ro"} for path in sorted(set(read_only)) if path
    }
    volumes[str(root)] = {"bind": str(root), "mode": "rw"}
    for source, dest in writable:
        volumes[source] = {"bind": dest, "mode": "rw"}
    return {
        "image": image,
        # The image's own entrypoint (the worker's start-up) is replaced, never run.
        "entrypoint": launcher(argv, env, limits, timeout_s),
        "network_disabled": True,
        "read_only": True,
        # The tree's total; each process is held to the same figure by RLIMIT_AS first.
        "mem_limit": f"{limits.memory_mb}m",
        # Swap would let a hog run past mem_limit.
        "memswap_limit": f"{limits.memory_mb}m",
        "pids_limit": limits.max_processes,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"},
        "volumes": volumes,
        "working_dir": str(cwd),
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
        "labels": {"org.test-autopilot.sandbox": "1"},
        # Removed explicitly after the logs are read; auto_remove could race with that.
        "auto_remove": False,
    }


def toolchain_dirs(program: str) -> list[str]:
    """Host directories a run of `program` needs that the image does not have: for an absolute
    program outside the system directories (Autopilot's own venv, a pyenv interpreter), its
    installation prefix, for the path given and the one its links lead to; and this process's
    interpreter prefixes when the program is that interpreter."""
    if not os.path.isabs(program):
        return []
    found: set[str] = set()
    for path in (program, os.path.realpath(program)):
        prefix = os.path.dirname(os.path.dirname(path))
        if prefix not in SYSTEM_DIRS:
            found.add(prefix)
    if os.path.realpath(program) == os.path.realpath(sys.executable):
        for prefix in (sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)):
            if prefix not in SYSTEM_DIRS:
                found.add(prefix)
    return sorted(p for p in found if os.path.isdir(p))


def _owner(root: Path) -> str:
    """uid:gid of the worktree, so files the run writes belong to whoever owns the worktree."""
    st = root.stat()
    return f"{st.st_uid}:{st.st_gid}"


def _pids_limit_hit(container_id: str) -> bool:
    """Whether the container's pids cgroup refused a fork (best effort: cgroup v1 and v2 with
    the cgroupfs or systemd driver, when this process sees the engine's cgroup tree)."""
    candidates = [
        f"/sys/fs/cgroup/pids/docker/{container_id}/pids.events",
        f"/sys/fs/cgroup/docker/{container_id}/pids.events",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/pids.events",
        f"/sys/fs/cgroup/pids/system.slice/docker-{container_id}.scope/pids.events",
    ]
    for path in candidates:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count) > 0
    return False


class DockerRunner(Runner):
    """Runs each command in a fresh container of the worker image (infra/)."""

    backend = "docker"

    def _setup(self) -> None:
        # Connecting is deferred to the first run, so building a runner stays cheap.
        self._client: Any = None
        self._image_path: str | None = None
        for path in self.settings.read_only:
            reason = declared_reason(path)
            if reason:
                raise SandboxError(f"sandbox.read_only refused: {reason}")

    def read_only_dirs(self, program: str) -> list[str]:
        """The host directories a run of `program` shows read-only: its installation, the
        runner's `toolchain_dirs` (the toolchain's tools, as bwrap shows them) and the declared
        ones; each checked again by the rule of :mod:`tasks.core.host_paths` (a refused one is
        not mounted, with a warning). An install step's sandbox adds the egress forwarder's
        interpreter and the proxy's socket directory (Autopilot's own, made for this run)."""
        dirs = []
        for path in [*toolchain_dirs(program), *self.toolchain_dirs]:
            dirs.append((path, forbidden_reason(path, allow_envs=True)))
        dirs += [(path, declared_reason(path)) for path in self.settings.read_only]
        for _, reason in dirs:
            if reason:
                logger.warning("not mounted in the sandbox: %s", reason)
        shown = [path for path, reason in dirs if not reason]
        if self.egress is not None:
            shown += [*toolchain_dirs(sys.executable), self.egress.socket_dir]
        return shown

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

    def image_path(self) -> str:
        """The PATH the image declares (its tools first), or the default one."""
        if self._image_path is None:
            from docker.errors import DockerException, ImageNotFound

            image = self.settings.docker_image
            try:
                attrs = self.client().images.get(image).attrs
            except ImageNotFound:
                raise SandboxError(
                    f"docker image {image} not found: build it from infra/ first"
                ) from None
            except DockerException as exc:
                raise SandboxError(
                    f"docker could not read image {image}: {_one_line(exc)}"
                ) from None
            env = dict(
                e.split("=", 1) for e in (attrs.get("Config") or {}).get("Env") or [] if "=" in e
            )
            self._image_path = env.get("PATH", DEFAULT_PATH)
        return self._image_path

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The run's whole environment: PATH, LANG, HOME, TMPDIR, the declared host variables
        (`[sandbox] pass_env`) and `env`; nothing else of the host's or the image's."""
        full = {
            "PATH": self.image_path(),
            "LANG": "C.UTF-8",
            "HOME": SANDBOX_HOME,
            "TMPDIR": "/tmp",
        }
        for name in self.settings.pass_env:
            if name in os.environ:
                full[name] = os.environ[name]
        full.update(env)
        return full

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        from docker.errors import DockerException, ImageNotFound

        client = self.client()
        kwargs = docker_run_kwargs(
            image=self.settings.docker_image,
            argv=self.egress_argv(argv),
            root=self.root,
            cwd=cwd,
            env=self.environment(env),
            limits=self.limits,
            timeout_s=timeout_s,
            user=_owner(self.root),
            read_only=self.read_only_dirs(argv[0]),
            writable=self.writable,
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
            raw = self._wait(container, timeout_s, start)
        finally:
            try:
                container.remove(force=True)
            except DockerException as exc:
                logger.warning("could not remove container: %s", _one_line(exc))
        missing = _NOT_FOUND.search(raw.stderr) if raw.exit_code == 127 else None
        if missing and missing.group(1) == argv[0]:
            raise SandboxError(f"{argv[0]}: command not found in the sandbox image {image}")
        return self._result(argv, raw, timeout_s)

    def _wait(self, container: Any, timeout_s: float, start: float) -> RawResult:
        """Start the container, wait for it (killing it at the timeout) and collect its output."""
        from docker.errors import DockerException

        try:
            container.start()
            timed_out, pids_hit = False, False
            try:
                status = container.wait(timeout=timeout_s)
                exit_code = int(status.get("StatusCode", 1))
            except requests.exceptions.RequestException:  # the wait outlived the timeout
                timed_out = True
                # Read while the container's cgroup still exists (it goes when it stops); a run
                # that ended on its own shows a refused fork in its output instead.
                pids_hit = _pids_limit_hit(container.id)
                container.kill()
                container.wait(timeout=30)
                exit_code = 137
            duration = time.monotonic() - start
            out, err = TailBuffer(self.limits.output_bytes), TailBuffer(self.limits.output_bytes)
            out.feed(container.logs(stdout=True, stderr=False))
            err.feed(container.logs(stdout=False, stderr=True))
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        except DockerException as exc:
            raise SandboxError(f"docker run failed: {_one_line(exc)}") from None
        return RawResult(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text() + ("\nout of memory (container OOM-killed)" if oom else ""),
            duration_s=duration,
            timed_out=timed_out,
            pids_limit_hit=pids_hit,
        )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
