"""Starting a sandboxed command on the host: the programs it needs, the environment it gets, the
per-run pids cgroup, and the process run with its limits (shared by the bwrap and none backends).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from tasks.core.errors import SandboxError
from tasks.sandbox import cgroup
from tasks.sandbox.base import DEFAULT_PATH, Limits, Runner
from tasks.sandbox.proc import RawResult, run_process

logger = logging.getLogger(__name__)


def resolve_program(argv0: str, cwd: Path, path_var: str) -> None:
    """Fail early, with a clear message, when the program does not exist."""
    if "/" in argv0:
        target = Path(argv0) if os.path.isabs(argv0) else cwd / argv0
        if not os.access(target, os.X_OK) or target.is_dir():
            raise SandboxError(f"{argv0}: command not found or not executable")
    elif shutil.which(argv0, path=path_var) is None:
        raise SandboxError(f"{argv0}: command not found on the sandbox PATH")


def tool(name: str) -> str:
    """The host program `name` a runner needs (SandboxError when missing)."""
    path = shutil.which(name)
    if path is None:
        raise SandboxError(f"{name} not found: install util-linux/bubblewrap")
    return path


def base_env(home: str, env: Mapping[str, str], path: str | None = None) -> dict[str, str]:
    """The allow-listed environment: nothing from the host but PATH and LANG."""
    base = {
        "PATH": path if path is not None else os.environ.get("PATH", DEFAULT_PATH),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": home,
    }
    base.update(env)
    return base


def _cgroup(limits: Limits) -> cgroup.PidsCgroup | None:
    parent = cgroup.pids_cgroup_parent()
    if parent is None:
        return None
    try:
        return cgroup.PidsCgroup(parent, limits.max_processes)
    except OSError as exc:
        logger.warning("no pids cgroup for this run (%s): process limit may not hold", exc)
        return None


def spawn(
    cmd: list[str], runner: Runner, env: dict[str, str], cwd: Path, timeout_s: float
) -> RawResult:
    """Run `cmd` with the runner's output limit, in a pids cgroup of its own when one can be
    made; SandboxError when it cannot start."""
    group = _cgroup(runner.limits)
    try:
        return run_process(
            cmd,
            env=env,
            cwd=str(cwd),
            timeout_s=timeout_s,
            output_limit=runner.limits.output_bytes,
            cgroup=group,
        )
    except OSError as exc:
        raise SandboxError(f"{cmd[0]}: could not start: {exc.strerror or exc}") from None
    finally:
        if group is not None:
            group.remove()
