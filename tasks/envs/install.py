"""The install step's record: one command's result and the environment's build log.

Every step runs in the sandbox of :mod:`tasks.envs.space` (the one place in Autopilot whose
commands may reach the package registries, through the egress proxy); this module holds what
the builders and the failure classifier share: :class:`StepResult` and the build log's lines
(each command with whether it may use the network and its time limit, then its output and its
exit status).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

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
    #: The command's standard output alone (a probe's answer).
    stdout: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def log_command(log_path: Path, argv: Sequence[str], *, network: bool, timeout_s: float) -> None:
    """Log one install command (with whether it may reach the registries) and append it to
    the build log."""
    where = "may reach the package registries" if network else "offline"
    log.info("install step (%s, timeout %.0f s): %s", where, timeout_s, " ".join(argv))
    append_log(log_path, f"$ {' '.join(argv)}    # {where}, timeout {timeout_s:.0f} s\n")


def append_log(log_path: Path, text: str) -> None:
    """Append `text` to the build log."""
    with log_path.open("a", encoding="utf-8", errors="replace") as out:
        out.write(text)
