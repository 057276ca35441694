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
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tasks.config import SandboxSettings
from tasks.errors import SandboxError
from tasks.sandbox_cache import cache_key, default_cache_dir
from tasks.sandbox_cgroup import PidsCgroup, pids_cgroup_parent
from tasks.sandbox_proc import RawResult, run_process
from tasks.sandbox_runner import DEFAULT_PATH, MB, SANDBOX_HOME, Limits, Runner
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
        "PATH": os.environ.get("PATH", DEFAULT_PATH),
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
            str(self.limits.tmp_mb * MB),
            "--tmpfs",
            "/tmp",
            "--dir",
            SANDBOX_HOME,
        ]
        # After the tmpfs, what lives under /tmp must show through the private /tmp: our own
        # interpreter (the python toolchain runs it) in a checkout cloned there, and the program
        # run when it is an absolute path there (a project's virtualenv), read-only like the rest
        # of the system; then the root, writable, last so that it wins over a read-only parent.
        for path in sorted(set(_interpreter_dirs_under_tmp() + _program_dirs_under_tmp(argv[0]))):
            if path != "/tmp":  # never the whole of /tmp: it would undo the private one
                cmd += ["--ro-bind", path, path]
        cmd += [
            "--bind",
            root,
            root,
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
        raw = _spawn(cmd, self, {"PATH": DEFAULT_PATH}, self.root, timeout_s)
        first = raw.stderr.lstrip().splitlines()[:1]
        if raw.exit_code == 1 and first and first[0].startswith("bwrap: "):
            raise SandboxError(f"sandbox setup failed for {argv[0]}: {first[0]}")
        return self._result(argv, raw, timeout_s)


def _interpreter_dirs_under_tmp() -> list[str]:
    """This process's interpreter directories that the sandbox's private /tmp would hide."""
    dirs = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    dirs |= {os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}
    return sorted(d for d in dirs if d == "/tmp" or d.startswith("/tmp/"))


def _program_dirs_under_tmp(program: str) -> list[str]:
    """The installation an absolute program under /tmp belongs to (``<prefix>/bin/<name>``
    -> ``<prefix>``), for the path given and the one its links lead to."""
    if not os.path.isabs(program):
        return []
    prefixes = {os.path.dirname(os.path.dirname(p)) for p in (program, os.path.realpath(program))}
    return sorted(d for d in prefixes if d.startswith("/tmp/"))


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
