"""The install step: the one step allowed to reach the package registries.

It runs on the host, outside the sandbox, before any test run: declared (every command is
logged with whether the network may be used), logged (command and output appended to the
environment's build log) and bounded by its own timeout (the whole process tree is killed).
Its environment is the host's without Autopilot's own secrets and without the variables that
would point the package tools at another installation.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Host variables never passed to an install step: Autopilot's secrets and settings, cloud and
#: forge credentials (a Gemfile or a setup.py is code that runs there).
_DROP_PREFIXES = ("AUTOPILOT_", "MISTRAL_", "AWS_", "PREFECT_", "GITHUB_", "GITLAB_", "CI_JOB_")
_DROP_NAMES = frozenset({"GH_TOKEN", "GL_TOKEN"})
#: Variables that point any package tool at another installation (a stack's builder adds its
#: own tools' variables through ``install_env(..., drop=...)``).
_TOOL_VARS = frozenset({"VIRTUAL_ENV", "CONDA_PREFIX"})
#: How much of the output the failure classifier reads (the end says what went wrong).
OUTPUT_TAIL = 64 * 1024


@dataclass(frozen=True)
class StepResult:
    """One install command: its exit code, the tail of its output, whether it timed out."""

    argv: tuple[str, ...]
    exit_code: int
    output: str
    timed_out: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def install_env(extra: Mapping[str, str], drop: Iterable[str] = ()) -> dict[str, str]:
    """The host environment for an install command: secrets and tool overrides (the shared
    ones and `drop`, the stack's) removed, `extra` added."""
    dropped = _TOOL_VARS | frozenset(drop)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_DROP_PREFIXES) and k not in _DROP_NAMES and k not in dropped
    }
    env.update(extra)
    return env


def run_step(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    log_path: Path,
    network: bool,
) -> StepResult:
    """Run one install command, appending it and its output to `log_path`.

    Args:
        argv: the command.
        cwd: where it runs (the project, or the environment being built).
        env: its whole environment (see :func:`install_env`).
        timeout_s: wall-clock limit; the process group is killed when it is reached.
        log_path: the build log.
        network: whether this step may reach the registries (logged, for the operator).
    """
    where = "may reach the package registries" if network else "offline"
    log.info("install step (%s, timeout %.0f s): %s", where, timeout_s, " ".join(argv))
    start = time.monotonic()
    with log_path.open("ab") as out:
        out.write(f"$ {' '.join(argv)}    # {where}, timeout {timeout_s:.0f} s\n".encode())
        out.flush()
        offset = out.tell()
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            out.write(f"could not start: {exc}\n".encode())
            return StepResult(tuple(argv), 127, f"{argv[0]}: {exc.strerror or exc}", False, 0.0)
        timed_out = False
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            code = proc.wait()
        out.write(f"# exit {code}{' (timed out)' if timed_out else ''}\n".encode())
    output = _read_from(log_path, offset)
    return StepResult(tuple(argv), code, output, timed_out, time.monotonic() - start)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _read_from(path: Path, offset: int) -> str:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        end = fh.tell()
        fh.seek(max(offset, end - OUTPUT_TAIL))
        return fh.read().decode("utf-8", errors="replace")
