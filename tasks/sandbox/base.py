"""The sandbox's common ground: resource limits and the runner interface every backend
implements (``tasks.sandbox.bwrap``, ``tasks.sandbox.docker``, ``tasks.sandbox.local``), with the
result cache every backend shares."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from tasks.core.config import SandboxSettings
from tasks.core.errors import SandboxError
from tasks.core.resources import resource_path
from tasks.core.run_context import RunContext, current_run_context
from tasks.core.secret_values import register_secret
from tasks.core.secrets import redact
from tasks.core.types import CommandResult
from tasks.sandbox.cache import ResultCache, cache_key, default_cache_dir
from tasks.sandbox.egress import EgressProxy
from tasks.sandbox.proc import OUTPUT_LIMIT, RawResult, classify
from tasks.sandbox.slots import command_slot

logger = logging.getLogger(__name__)


@functools.cache
def forwarder_code() -> str:
    """The egress forwarder's source (``resources/egress_forward.py``), read once."""
    return resource_path("tasks/sandbox/resources/egress_forward.py").read_text("utf-8")


Backend = Literal["bwrap", "docker", "none"]
#: Where the private HOME lives inside the sandbox (on the private /tmp).
SANDBOX_HOME = "/tmp/home"
#: The PATH inside a sandbox when the host has none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MB = 1024 * 1024


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
            f"--as={self.memory_mb * MB}",
            # Hard above soft: SIGXCPU (a nameable reason) first, SIGKILL only if ignored.
            f"--cpu={self.cpu_for(timeout_s)}:{self.cpu_for(timeout_s) + 2}",
            f"--fsize={self.file_mb * MB}",
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
        toolchain_dirs: Sequence[str | Path] = (),
        writable: Sequence[tuple[str, str]] = (),
        egress: EgressProxy | None = None,
        inherit_context: bool = True,
    ) -> None:
        root = Path(root).resolve()
        if not root.is_dir():
            raise SandboxError(f"{root}: sandbox root is not a directory")
        if root == Path("/"):
            raise SandboxError("/: the sandbox root cannot be the whole file system")
        self.settings = settings
        self.root = root
        self.limits = limits or Limits.from_settings(settings)
        # The run's prepared environment and services sockets (tasks.core.run_context); an
        # install step's sandbox takes none of them.
        context = current_run_context() if inherit_context else RunContext()
        #: Extra read-only directories the toolchains need, each shown by its exact path.
        self.toolchain_dirs = [
            os.path.abspath(d) for d in dict.fromkeys([*map(str, toolchain_dirs), *context.dirs])
        ]
        #: Variables every command gets (the run's context), under the caller's own.
        self.fixed_env = dict(context.env)
        #: Host directories shown writable at another place (an environment being built, at
        #: its final path): set by Autopilot's install step only, never by configuration.
        self.writable = [(os.path.abspath(src), os.path.abspath(dst)) for src, dst in writable]
        #: The proxy an install step reaches the registries through (None: no network).
        self.egress = egress
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
        # Declared host variables first: what the caller sets wins.
        passed = {n: os.environ[n] for n in self.settings.pass_env if n in os.environ}
        # What goes in is a secret to what comes out: redacted by value in every form (_result).
        register_secret(*passed.values())
        env = {**passed, **self.fixed_env, **(env or {})}
        full_key = self._full_key(cache_key, cwd, env) if cache_key else None
        if full_key is not None:
            hit = self.cache.get(full_key)
            if hit is not None:
                logger.info("cache hit for %s", " ".join(argv))
                return hit
        with command_slot(self.settings.max_parallel):
            result = self._execute(argv, cwd=cwd, env=env, timeout_s=timeout)
        # Only runs that completed on their own are reusable: a timeout or a limit may be
        # the host's fault and must be retried.
        if full_key is not None and not result.timed_out and result.reason is None:
            self.cache.put(full_key, result)
        return result

    def _full_key(self, key: str, cwd: Path, env: Mapping[str, str]) -> str:
        where = str(cwd.relative_to(self.root))
        view = [self.settings.read_only, self.toolchain_dirs]
        return cache_key(key, "", [where], json.dumps([sorted(env.items()), view]))

    def host_path(self, path: str) -> str:
        """Where `path` (as the command sees it) is on the host: a path under a writable
        bind's destination lies in its source (host-side checks look there)."""
        for source, dest in self.writable:
            if path == dest or path.startswith(dest.rstrip("/") + "/"):
                return source + path[len(dest) :]
        return path

    def egress_argv(self, argv: list[str]) -> list[str]:
        """`argv` started through the egress forwarder when this runner has a proxy (the
        forwarder runs on Autopilot's interpreter, which every backend shows)."""
        if self.egress is None:
            return argv
        code = forwarder_code()
        return [sys.executable, "-I", "-c", code, self.egress.socket_path, "--", *argv]

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
            # Redacted here, once for every backend: a secret a test printed never leaves the
            # sandbox as it was (prompts, reports, logs, the archive and the cache see this).
            stdout=redact(raw.stdout),
            stderr=redact(raw.stderr),
            duration_s=round(raw.duration_s, 6),
            timed_out=raw.timed_out,
            reason=reason,
            backend=self.backend,
        )
