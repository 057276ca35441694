"""The none backend: a plain subprocess with the same timeout, tree kill and rlimits, only when
chosen explicitly (with a warning): no isolation at all."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tasks.core.types import CommandResult
from tasks.sandbox.base import Runner
from tasks.sandbox.spawn import base_env, resolve_program, spawn, tool

logger = logging.getLogger(__name__)


class LocalRunner(Runner):
    """No isolation at all: a plain subprocess with the same timeout, tree kill and rlimits."""

    backend = "none"

    def _setup(self) -> None:
        self.prlimit = tool("prlimit")
        logger.warning(
            "sandbox backend 'none': commands in %s run on the host with no isolation "
            "(network, file system and other processes are reachable)",
            self.root,
        )

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        full_env = base_env(os.environ.get("HOME", "/"), env)
        resolve_program(argv[0], cwd, full_env["PATH"])
        # No RLIMIT_NPROC here: on the host it counts every process of the user, not ours.
        cmd = [self.prlimit, *self.limits.prlimit_args(timeout_s, nproc=False), "--", *argv]
        raw = spawn(cmd, self, full_env, cwd, timeout_s)
        return self._result(argv, raw, timeout_s)
