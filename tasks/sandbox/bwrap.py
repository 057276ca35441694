"""The bwrap backend: no network, the deny-by-default view of :mod:`tasks.sandbox.view`, only the
worktree and a private /tmp writable, every limit, the whole process tree killed at timeout.

The process limit: RLIMIT_NPROC is not enforced for uid 0, and the pipeline often runs as root
in CI containers. So a per-run cgroup `pids.max` is used whenever a pids cgroup is writable
(see :mod:`tasks.sandbox.cgroup`); otherwise, as root, the sandbox's own pid namespace gets a
``pid_max`` (Linux 6.14+, :mod:`tasks.sandbox.pidns`); otherwise RLIMIT_NPROC is set inside
bwrap's user namespace, which holds for a non-root user (its count starts afresh in the new
namespace). As root with none of these, no process limit can be enforced and a warning names
the missing kernel feature.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from tasks.core.errors import SandboxError
from tasks.core.types import CommandResult
from tasks.sandbox import cgroup
from tasks.sandbox.base import DEFAULT_PATH, MB, SANDBOX_HOME, Runner
from tasks.sandbox.pidns import CAP_ARGS, SETUP_FAILED, pid_namespace_limit_available, wrap
from tasks.sandbox.spawn import base_env, resolve_program, spawn, tool
from tasks.sandbox.view import View, build_view, interpreter_dirs, proc_args

logger = logging.getLogger(__name__)


@functools.cache
def _bwrap_works(bwrap: str) -> tuple[bool, str]:
    """Probe once whether bwrap can create its namespaces on this host."""
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


@functools.cache
def _bwrap_can_disable_userns(bwrap: str) -> bool:
    """bwrap 0.8+ can forbid nested user namespaces inside the sandbox."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--disable-userns" in done.stdout


#: How the process limit is enforced: a pids cgroup, RLIMIT_NPROC in the user namespace (non-
#: root), the sandbox's pid namespace (root, Linux 6.14+), or not at all.
LimitMode = Literal["cgroup", "nproc", "pid_namespace", "none"]


def process_limit_mode(bwrap: str) -> tuple[LimitMode, str]:
    """How bwrap runs limit their processes here, and what is missing when nothing does."""
    if cgroup.pids_cgroup_parent() is not None:
        return "cgroup", ""
    if os.geteuid() != 0:
        return "nproc", ""
    ok, missing = pid_namespace_limit_available(bwrap)
    if ok:
        return "pid_namespace", ""
    return "none", f"a writable pids cgroup (v1, or v2 with pids delegated) or {missing}"


class BwrapRunner(Runner):
    """bubblewrap: no network, deny-by-default view, only the root and a private /tmp writable."""

    backend = "bwrap"

    def _setup(self) -> None:
        self.bwrap = tool("bwrap")
        self.prlimit = tool("prlimit")
        ok, detail = _bwrap_works(self.bwrap)
        if not ok:
            raise SandboxError(
                f"bwrap cannot create a sandbox on this host ({detail or 'unknown error'}):"
                " enable user namespaces or choose sandbox backend none"
            )
        self.limit_mode, missing = process_limit_mode(self.bwrap)
        if self.limit_mode == "none":
            logger.warning(
                "running as root without a process limit (RLIMIT_NPROC does not apply to "
                "root): needs %s",
                missing,
            )
        self._no_userns = _bwrap_can_disable_userns(self.bwrap)
        refused = build_view(str(self.root), declared=self.settings.read_only).skipped
        if refused:
            raise SandboxError(f"sandbox.read_only refused: {refused[0]}")

    def view(self, program: str) -> View:
        """What the sandbox shows for a run of `program`: the toolchains' directories, which
        are Autopilot's own interpreter (its venv and base), the runner's `toolchain_dirs` and
        the installation `program` belongs to when it is an absolute path."""
        dirs = [*interpreter_dirs(sys.executable), *self.toolchain_dirs, *interpreter_dirs(program)]
        view = build_view(str(self.root), toolchain_dirs=dirs, declared=self.settings.read_only)
        for reason in view.skipped:
            logger.warning("not shown in the sandbox: %s", reason)
        return view

    def command(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float,
        view: View | None = None,
    ) -> list[str]:
        """The full bwrap command line for `argv` (pure; exposed for tests and debugging)."""
        view = view or self.view(argv[0])
        pid_ns = self.limit_mode == "pid_namespace"
        cmd = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        if pid_ns:
            # The setup step needs two capabilities for a moment; it drops them all itself.
            cmd += CAP_ARGS
        else:
            cmd += ["--cap-drop", "ALL"]
            if self._no_userns:
                cmd += ["--unshare-user", "--disable-userns"]
        for mount in view.system:
            cmd += mount.args()
        cmd += ["--dev", "/dev", *proc_args(writable_sys=pid_ns)]
        cmd += ["--size", str(self.limits.tmp_mb * MB), "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
        # After the private /tmp (a toolchain may live under /tmp), the worktree last so that it
        # stays writable inside a read-only parent.
        for mount in [*view.extra, view.root]:
            cmd += mount.args()
        for source, dest in self.writable:
            cmd += ["--bind", source, dest]
        if self.egress is not None:
            cmd += ["--ro-bind", self.egress.socket_dir, self.egress.socket_dir]
        # bwrap builds the view on a tmpfs; it is made read-only once every mount is in place.
        cmd += ["--remount-ro", "/", "--clearenv"]
        for name, value in env.items():
            cmd += ["--setenv", name, value]
        cmd += ["--chdir", str(cwd)]
        # Without a cgroup, RLIMIT_NPROC set inside the new user namespace is the process limit.
        inner = [self.prlimit, *self.limits.prlimit_args(timeout_s, nproc=True), "--", *argv]
        if pid_ns:
            inner = wrap(inner, self.limits.max_processes)
        return [*cmd, *inner]

    def _execute(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float
    ) -> CommandResult:
        view = self.view(argv[0])
        path = view.sandbox_path(os.environ.get("PATH", DEFAULT_PATH)) or DEFAULT_PATH
        full_env = base_env(SANDBOX_HOME, {"TMPDIR": "/tmp", **env}, path=path)
        program = self.host_path(argv[0])
        resolve_program(program, cwd, full_env["PATH"])
        if os.path.isabs(argv[0]) and program == argv[0] and not view.shows(argv[0]):
            raise SandboxError(
                f"{argv[0]}: not visible in the sandbox; declare its directory in "
                "[sandbox] read_only"
            )
        wrapped = self.egress_argv(argv)
        cmd = self.command(wrapped, cwd=cwd, env=full_env, timeout_s=timeout_s, view=view)
        # bwrap itself gets a minimal environment; the command's is set by --setenv.
        raw = spawn(cmd, self, {"PATH": DEFAULT_PATH}, self.root, timeout_s)
        first = raw.stderr.lstrip().splitlines()[:1]
        if raw.exit_code == 1 and first and first[0].startswith("bwrap: "):
            raise SandboxError(f"sandbox setup failed for {argv[0]}: {first[0]}")
        if raw.exit_code == 125 and first and first[0] == SETUP_FAILED:
            raise SandboxError(f"sandbox setup failed for {argv[0]}: {first[0]}")
        return self._result(argv, raw, timeout_s)
