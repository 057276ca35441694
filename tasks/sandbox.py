"""Sandboxed command runs: bwrap (default), docker (production workers) or none (explicit).

Use :func:`make_runner` and call :meth:`Runner.run`. Every backend applies the same limits:
wall-clock timeout with the whole process tree killed, address space (RLIMIT_AS), CPU time
(RLIMIT_CPU), file size (RLIMIT_FSIZE) and a process limit, and returns a
:class:`~tasks.types.CommandResult` whose `reason` says in words why a run was stopped.

The process limit: RLIMIT_NPROC is not enforced for uid 0, and the pipeline often runs as root
in CI containers. So a per-run cgroup `pids.max` is used whenever a pids cgroup is writable
(see :mod:`tasks.sandbox_cgroup`); otherwise RLIMIT_NPROC is set inside bwrap's user namespace,
which holds for a non-root user (its count starts afresh in the new namespace). As root without
a writable cgroup, no process limit can be enforced and a warning says so.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from tasks.config import SandboxSettings
from tasks.errors import SandboxError
from tasks.sandbox_cache import ResultCache, cache_key, default_cache_dir
from tasks.sandbox_cgroup import PidsCgroup, pids_cgroup_parent
from tasks.sandbox_proc import OUTPUT_LIMIT, RawResult, classify, run_process
from tasks.types import CommandResult

__all__ = [
    "BwrapRunner",
    "Limits",
    "LocalRunner",
    "Runner",
    "cache_key",
    "default_cache_dir",
    "make_runner",
]

logger = logging.getLogger(__name__)

Backend = Literal["bwrap", "docker", "none"]
#: Where the private HOME lives inside the sandbox (on the private /tmp).
SANDBOX_HOME = "/tmp/home"
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Resource limits of one command run."""

    memory_mb: int = 4096
    max_processes: int = 256
    file_mb: int = 1024
    tmp_mb: int = 1024
    output_bytes: int = OUTPUT_LIMIT
    #: CPU seconds per process; None means the run's timeout plus a margin.
    cpu_s: int | None = None

    @classmethod
    def from_settings(cls, settings: SandboxSettings) -> Limits:
        """The limits configured in the sandbox settings, with defaults for the rest."""
        return cls(memory_mb=settings.memory_mb, max_processes=settings.max_processes)

    def cpu_for(self, timeout_s: float) -> int:
        """RLIMIT_CPU for a run: a backstop, the wall-clock timeout normally fires first."""
        return self.cpu_s if self.cpu_s is not None else math.ceil(timeout_s) + 5

    def prlimit_args(self, timeout_s: float, *, nproc: bool) -> list[str]:
        """Options for `prlimit(1)`, applied to the command itself (not to bwrap)."""
        args = [
            f"--as={self.memory_mb * _MB}",
            # Hard above soft: SIGXCPU (a nameable reason) first, SIGKILL only if ignored.
            f"--cpu={self.cpu_for(timeout_s)}:{self.cpu_for(timeout_s) + 2}",
            f"--fsize={self.file_mb * _MB}",
            "--core=0",
        ]
        if nproc:
            args.append(f"--nproc={self.max_processes}")
        return args


class Runner(ABC):
    """Runs commands against one worktree (`root`, the only writable directory)."""

    backend: ClassVar[Backend]

    def __init__(
        self,
        settings: SandboxSettings,
        root: Path,
        *,
        cache_dir: Path | None = None,
        limits: Limits | None = None,
    ) -> None:
        root = Path(root).resolve()
        if not root.is_dir():
            raise SandboxError(f"{root}: sandbox root is not a directory")
        if root == Path("/"):
            raise SandboxError("/: the sandbox root cannot be the whole file system")
        self.settings = settings
        self.root = root
        self.limits = limits or Limits.from_settings(settings)
        self.cache = ResultCache(cache_dir if cache_dir is not None else default_cache_dir())
        self._setup()

    @abstractmethod
    def _setup(self) -> None:
        """Backend-specific checks, run at the end of construction."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        cache_key: str | None = None,
    ) -> CommandResult:
        """Run `argv` in `cwd` (inside the root) and return what it did.

        Args:
            argv: the command and its arguments.
            cwd: working directory; must be the root or below it.
            env: extra environment variables (the host environment is never passed on).
            timeout_s: wall-clock limit; defaults to the settings' timeout.
            cache_key: from :func:`cache_key`; an identical earlier run that completed is
                returned with cached=True instead of running again.

        Raises:
            SandboxError: bad argv or cwd, command not found, or the sandbox failed to start.
        """
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise SandboxError(f"invalid command {argv!r}: expected non-empty strings")
        cwd = Path(cwd).resolve()
        if not cwd.is_relative_to(self.root):
            raise SandboxError(f"{cwd}: working directory is outside the sandbox root {self.root}")
        if not cwd.is_dir():
            raise SandboxError(f"{cwd}: working directory does not exist")
        timeout = timeout_s if timeout_s is not None else self.settings.timeout_s
        env = dict(env or {})
        full_key = self._full_key(cache_key, cwd, env) if cache_key else None
        if full_key is not None:
            hit = self.cache.get(full_key)
            if hit is not None:
                logger.info("cache hit for %s", " ".join(argv))
                return hit
        result = self._execute(argv, cwd=cwd, env=env, timeout_s=timeout)
        # Only runs that completed on their own are reusable: a timeout or a limit may be
        # the host's fault and must be retried.
        if full_key is not None and not result.timed_out and result.reason is None:
            self.cache.put(full_key, result)
        return result

    def _full_key(self, key: str, cwd: Path, env: Mapping[str, str]) -> str:
        where = str(cwd.relative_to(self.root))
        return cache_key(key, "", [where], json.dumps(sorted(env.items())))

    @abstractmethod
    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        """Run the command for real."""

    def _result(self, argv: list[str], raw: RawResult, timeout_s: float) -> CommandResult:
        reason = classify(
            raw,
            timeout_s=timeout_s,
            memory_mb=self.limits.memory_mb,
            max_processes=self.limits.max_processes,
        )
        if reason:
            logger.info("%s: %s", " ".join(argv), reason)
        return CommandResult(
            argv=list(argv),
            exit_code=raw.exit_code,
            stdout=raw.stdout,
            stderr=raw.stderr,
            duration_s=round(raw.duration_s, 6),
            timed_out=raw.timed_out,
            reason=reason,
            backend=self.backend,
        )


def _resolve_program(argv0: str, cwd: Path, path_var: str) -> None:
    """Fail early, with a clear message, when the program does not exist."""
    if "/" in argv0:
        target = Path(argv0) if os.path.isabs(argv0) else cwd / argv0
        if not os.access(target, os.X_OK) or target.is_dir():
            raise SandboxError(f"{argv0}: command not found or not executable")
    elif shutil.which(argv0, path=path_var) is None:
        raise SandboxError(f"{argv0}: command not found on the sandbox PATH")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxError(f"{name} not found: install util-linux/bubblewrap")
    return path


def _base_env(home: str, env: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed environment: nothing from the host but PATH and LANG."""
    base = {
        "PATH": os.environ.get("PATH", _DEFAULT_PATH),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": home,
    }
    base.update(env)
    return base


def _cgroup(limits: Limits) -> PidsCgroup | None:
    parent = pids_cgroup_parent()
    if parent is None:
        return None
    try:
        return PidsCgroup(parent, limits.max_processes)
    except OSError as exc:
        logger.warning("no pids cgroup for this run (%s): process limit may not hold", exc)
        return None


def _spawn(
    cmd: list[str], runner: Runner, env: dict[str, str], cwd: Path, timeout_s: float
) -> RawResult:
    cgroup = _cgroup(runner.limits)
    try:
        return run_process(
            cmd,
            env=env,
            cwd=str(cwd),
            timeout_s=timeout_s,
            output_limit=runner.limits.output_bytes,
            cgroup=cgroup,
        )
    except OSError as exc:
        raise SandboxError(f"{cmd[0]}: could not start: {exc.strerror or exc}") from None
    finally:
        if cgroup is not None:
            cgroup.remove()


@functools.cache
def _bwrap_works(bwrap: str) -> tuple[bool, str]:
    """Probe once whether bwrap can create its namespaces on this host."""
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


class BwrapRunner(Runner):
    """bubblewrap: no network, system read-only, only the root and a private /tmp writable."""

    backend = "bwrap"

    def _setup(self) -> None:
        self.bwrap = _tool("bwrap")
        self.prlimit = _tool("prlimit")
        ok, detail = _bwrap_works(self.bwrap)
        if not ok:
            raise SandboxError(
                f"bwrap cannot create a sandbox on this host ({detail or 'unknown error'}):"
                " enable user namespaces or choose sandbox backend none"
            )
        self._cgroups = pids_cgroup_parent() is not None
        if not self._cgroups and os.geteuid() == 0:
            logger.warning(
                "running as root without a writable pids cgroup: the process limit is not "
                "enforced (RLIMIT_NPROC does not apply to root)"
            )

    def command(
        self, argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float
    ) -> list[str]:
        """The full bwrap command line for `argv` (pure; exposed for tests and debugging)."""
        root = str(self.root)
        cmd = [
            self.bwrap,
            "--unshare-all",  # every namespace, the network included: no --share-net
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            str(self.limits.tmp_mb * _MB),
            "--tmpfs",
            "/tmp",
            "--dir",
            SANDBOX_HOME,
            # After the tmpfs: a root under /tmp must show through the private /tmp.
            "--bind",
            root,
            root,
        ]
        # So must our own interpreter (the python toolchain runs it) when it lives under /tmp,
        # as it does in a checkout cloned there: read-only, like the rest of the system.
        for path in _interpreter_dirs_under_tmp():
            if not (root == path or root.startswith(path + "/")):
                cmd += ["--ro-bind", path, path]
        cmd += [
            "--clearenv",
        ]
        for name, value in env.items():
            cmd += ["--setenv", name, value]
        cmd += ["--chdir", str(cwd), self.prlimit]
        # Without a cgroup, RLIMIT_NPROC set inside the new user namespace is the process limit.
        cmd += self.limits.prlimit_args(timeout_s, nproc=True)
        return [*cmd, "--", *argv]

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        full_env = _base_env(SANDBOX_HOME, {"TMPDIR": "/tmp", **env})
        _resolve_program(argv[0], cwd, full_env["PATH"])
        cmd = self.command(argv, cwd=cwd, env=full_env, timeout_s=timeout_s)
        # bwrap itself gets a minimal environment; the command's is set by --setenv.
        raw = _spawn(cmd, self, {"PATH": _DEFAULT_PATH}, self.root, timeout_s)
        first = raw.stderr.lstrip().splitlines()[:1]
        if raw.exit_code == 1 and first and first[0].startswith("bwrap: "):
            raise SandboxError(f"sandbox setup failed for {argv[0]}: {first[0]}")
        return self._result(argv, raw, timeout_s)


def _interpreter_dirs_under_tmp() -> list[str]:
    """This process's interpreter directories that the sandbox's private /tmp would hide."""
    dirs = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    dirs |= {os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}
    return sorted(d for d in dirs if d == "/tmp" or d.startswith("/tmp/"))


class LocalRunner(Runner):
    """No isolation at all: a plain subprocess with the same timeout, tree kill and rlimits."""

    backend = "none"

    def _setup(self) -> None:
        self.prlimit = _tool("prlimit")
        logger.warning(
            "sandbox backend 'none': commands in %s run on the host with no isolation "
            "(network, file system and other processes are reachable)",
            self.root,
        )

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        full_env = _base_env(os.environ.get("HOME", "/"), env)
        _resolve_program(argv[0], cwd, full_env["PATH"])
        # No RLIMIT_NPROC here: on the host it counts every process of the user, not ours.
        cmd = [self.prlimit, *self.limits.prlimit_args(timeout_s, nproc=False), "--", *argv]
        raw = _spawn(cmd, self, full_env, cwd, timeout_s)
        return self._result(argv, raw, timeout_s)


def make_runner(
    settings: SandboxSettings,
    root: Path,
    *,
    cache_dir: Path | None = None,
    limits: Limits | None = None,
) -> Runner:
    """The runner for the configured backend.

    Args:
        settings: sandbox settings (backend, timeout, memory, processes, docker image).
        root: the worktree; the only directory commands may write to.
        cache_dir: result cache directory; default `$AUTOPILOT_HOME/cache/sandbox`.
        limits: override the limits derived from the settings (file size, /tmp size, ...).

    Raises:
        SandboxError: the backend is unavailable ("auto" without bwrap says how to fix it).
    """
    backend = settings.backend
    if backend == "auto":
        if shutil.which("bwrap") is None:
            raise SandboxError(
                "bubblewrap (bwrap) is not installed: install it (e.g. apt-get install "
                "bubblewrap) or set AUTOPILOT_SANDBOX__BACKEND=none to run without isolation"
            )
        backend = "bwrap"
    if backend == "bwrap":
        if shutil.which("bwrap") is None:
            raise SandboxError("sandbox backend bwrap chosen but bwrap is not installed")
        return BwrapRunner(settings, root, cache_dir=cache_dir, limits=limits)
    if backend == "docker":
        from tasks.sandbox_docker import DockerRunner

        return DockerRunner(settings, root, cache_dir=cache_dir, limits=limits)
    return LocalRunner(settings, root, cache_dir=cache_dir, limits=limits)
