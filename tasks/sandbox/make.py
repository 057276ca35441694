"""The runner of the configured sandbox backend: bwrap (default when installed), docker
(production workers) or none (explicit, with a warning).

Use :func:`make_runner` and call its ``run``. Every backend applies the same limits: wall-clock
timeout with the whole process tree killed, address space (RLIMIT_AS), CPU time (RLIMIT_CPU),
file size (RLIMIT_FSIZE) and a process limit, and returns a
:class:`~tasks.core.types.CommandResult` whose `reason` says in words why a run was stopped.
What bwrap shows is :mod:`tasks.sandbox.view`.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from tasks.core.config import SandboxSettings
from tasks.core.errors import SandboxError
from tasks.sandbox.base import Limits, Runner
from tasks.sandbox.egress import EgressProxy


def make_runner(
    settings: SandboxSettings,
    root: Path,
    *,
    cache_dir: Path | None = None,
    limits: Limits | None = None,
    toolchain_dirs: Sequence[str | Path] = (),
    writable: Sequence[tuple[str, str]] = (),
    egress: EgressProxy | None = None,
    inherit_context: bool = True,
) -> Runner:
    """The runner for the configured backend.

    Args:
        settings: sandbox settings (backend, timeout, memory, processes, docker image, the
            declared read-only paths and passed environment variables).
        root: the worktree; the only directory commands may write to.
        cache_dir: result cache directory; default `$AUTOPILOT_HOME/cache/sandbox`.
        limits: override the limits derived from the settings (file size, /tmp size, ...).
        toolchain_dirs: extra read-only toolchain directories, each shown by its exact path
            (e.g. a prepared environment ``$AUTOPILOT_HOME/envs/<name>``, or what
            :func:`interpreter_dirs` gives for an interpreter). The interpreter a command
            starts with (an absolute ``argv[0]``) is added on its own.
        writable: (host directory, path in the sandbox) pairs shown writable: the install
            step's environment being built, at its final path (bwrap and docker).
        egress: the proxy an install step reaches the registries through
            (:mod:`tasks.sandbox.egress`); None: no network at all.
        inherit_context: False for an install step: none of the run's prepared directories,
            services or variables (:mod:`tasks.core.run_context`).

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
    cls: type[Runner]
    if backend == "bwrap":
        if shutil.which("bwrap") is None:
            raise SandboxError("sandbox backend bwrap chosen but bwrap is not installed")
        from tasks.sandbox.bwrap import BwrapRunner

        cls = BwrapRunner
    elif backend == "docker":
        from tasks.sandbox.docker import DockerRunner

        cls = DockerRunner
    else:
        from tasks.sandbox.local import LocalRunner

        cls = LocalRunner
    return cls(
        settings,
        root,
        cache_dir=cache_dir,
        limits=limits,
        toolchain_dirs=toolchain_dirs,
        writable=writable,
        egress=egress,
        inherit_context=inherit_context,
    )
