"""Where an environment's install steps run: a sandbox over a private copy of the project.

An install runs the project's own code (a ``setup.py``, a PEP 517 backend in the tree, a
Gemfile, gem extensions), so it runs like a test run, never on the host:

- in the configured sandbox backend (bwrap or docker; ``none`` only when the operator chose
  it), with its own PID namespace (no ``/proc`` of Autopilot), the cleared environment of
  :func:`install_environment` (no secret of Autopilot's, none of the operator's variables but
  the package tools' own settings, credentials taken out), a private HOME, cache and TMPDIR;
- writable: only a private copy of the project (its build may write ``build/`` or
  ``*.egg-info`` there; the worktree stays as it was) and the environment being built, shown
  at its final path (so what the install writes names the place it will live); nothing else
  of ``$AUTOPILOT_HOME`` is visible;
- the network only for the steps that may use it (``[envs] network``), through the egress
  proxy (:mod:`tasks.sandbox.egress`): the registries, never the host's loopback services,
  the metadata service or the internal network; the other steps have none at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tasks.core.config import SandboxSettings
from tasks.core.errors import SandboxError
from tasks.envs.install import StepResult, append_log, log_command
from tasks.sandbox.base import Limits, Runner
from tasks.sandbox.egress import EgressProxy, egress_proxy, host_upstream
from tasks.sandbox.egress_policy import EgressPolicy, host_addresses
from tasks.sandbox.make import make_runner

log = logging.getLogger(__name__)

#: Project entries never copied for an install: VCS data, other installs, Autopilot's own.
SKIP_NAMES = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", ".autopilot-tmp"})
#: Host variables an install step keeps: the package tools' own settings (indexes, mirrors,
#: certificates, time-outs) and the locale; never a name that looks like a credential.
KEEP_PREFIXES = ("UV_", "PIP_", "BUNDLE_MIRROR__", "npm_config_", "NPM_CONFIG_")
KEEP_NAMES = frozenset(
    {"LANG", "LC_ALL", "LC_CTYPE", "TZ", "SOURCE_DATE_EPOCH", "SSL_CERT_FILE", "SSL_CERT_DIR"}
    | {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}
)
_SECRET_NAME = re.compile(r"TOKEN|PASSW|SECRET|AUTH|CREDENTIAL|(?:^|_)KEY(?:_|$)", re.I)
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
#: Installs write large files (wheels of several GB); the other limits are the sandbox's.
INSTALL_FILE_MB = 16384


def install_environment(environ: Mapping[str, str], drop: Sequence[str] = ()) -> dict[str, str]:
    """The host variables an install step gets: :data:`KEEP_NAMES` and the package tools'
    settings (:data:`KEEP_PREFIXES`), without credential-like names, user:password taken out
    of URLs, and without `drop` (variables that would point a tool at another installation)."""
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if name in drop or _SECRET_NAME.search(name):
            continue
        if name in KEEP_NAMES or name.startswith(KEEP_PREFIXES):
            kept[name] = _USERINFO.sub("", value)
    return kept


def copy_project(project: Path, dest: Path) -> None:
    """Copy `project` to `dest`: directories, regular files and links as links (never
    followed: a link to a host file stays a link, resolved inside the sandbox's view);
    sockets, FIFOs and devices, and :data:`SKIP_NAMES`, are left out."""
    dest.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(project):
        rel = Path(dirpath).relative_to(project)
        dirnames[:] = [d for d in dirnames if d not in SKIP_NAMES]
        for name in [*dirnames, *filenames]:
            if name in SKIP_NAMES:
                continue
            source, target = Path(dirpath) / name, dest / rel / name
            st = source.lstat()
            if stat.S_ISLNK(st.st_mode):
                target.symlink_to(os.readlink(source))
                dirnames[:] = [d for d in dirnames if d != name]
            elif stat.S_ISDIR(st.st_mode):
                target.mkdir()
            elif stat.S_ISREG(st.st_mode):
                shutil.copy2(source, target)


class InstallSpace:
    """One environment build's sandbox: the copy of the project, the paths the install sees
    and :meth:`run` for each step (see the module docstring)."""

    def __init__(
        self,
        project: Path,
        tmp: Path,
        final: Path,
        log_path: Path,
        *,
        sandbox: SandboxSettings,
        allow_hosts: Sequence[str] | None,
        tool_dirs: Sequence[str],
    ) -> None:
        self.project, self.tmp, self.final, self.log_path = project, tmp, final, log_path
        self.scratch = Path(tempfile.mkdtemp(prefix="autopilot-install-"))
        self.src = self.scratch / "src"
        copy_project(project, self.src)
        for name in ("home", "tmp", "cache"):
            (self.scratch / name).mkdir()
        # No sandbox backend can show `tmp` at another place: the install writes there.
        self.remapped = sandbox.backend != "none"
        #: Where the environment being built is, as the install's commands see it.
        self.out = final if self.remapped else tmp
        self._settings = sandbox.model_copy(update={"read_only": [], "pass_env": []})
        self._allow_hosts = tuple(allow_hosts) if allow_hosts is not None else None
        self._tool_dirs = list(tool_dirs)
        self._stack = contextlib.ExitStack()
        self._proxy: EgressProxy | None = None
        self._runners: dict[bool, Runner] = {}

    def path(self, *parts: str) -> str:
        """A path inside the environment being built, as the install's commands see it."""
        return str(self.out.joinpath(*parts))

    def base_env(self, drop: Sequence[str] = ()) -> dict[str, str]:
        """What every step gets before its own variables: the package tools' settings (less
        `drop`), a private HOME, cache and TMPDIR."""
        own = {
            "HOME": str(self.scratch / "home"),
            "TMPDIR": str(self.scratch / "tmp"),
            "XDG_CACHE_HOME": str(self.scratch / "cache"),
        }
        return {**install_environment(os.environ, drop), **own}

    def _runner(self, network: bool) -> Runner:
        if network not in self._runners:
            if network and self._proxy is None:
                policy = EgressPolicy(self._allow_hosts, own_addresses=host_addresses())
                self._proxy = self._stack.enter_context(egress_proxy(policy, host_upstream()))
            limits = Limits.from_settings(self._settings)
            self._runners[network] = make_runner(
                self._settings,
                self.scratch,
                cache_dir=self.scratch / "cache" / "results",
                limits=Limits(
                    memory_mb=limits.memory_mb,
                    max_processes=limits.max_processes,
                    file_mb=INSTALL_FILE_MB,
                ),
                toolchain_dirs=self._tool_dirs,
                writable=[(str(self.tmp), str(self.final))] if self.remapped else [],
                egress=self._proxy if network else None,
                inherit_context=False,
            )
        return self._runners[network]

    def run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        timeout_s: float,
        network: bool,
        cwd: Path | None = None,
        drop: Sequence[str] = (),
    ) -> StepResult:
        """Run one install step in the sandbox (in the project's copy unless `cwd`), logged
        with its output; the network (through the egress proxy) only when `network`; `drop`
        names host variables that would point the tool at another installation."""
        log_command(self.log_path, argv, network=network, timeout_s=timeout_s)
        seen = len(self._proxy.decisions) if self._proxy is not None else 0
        try:
            runner = self._runner(network)
            done = runner.run(
                argv, cwd=cwd or self.src, env={**self.base_env(drop), **env}, timeout_s=timeout_s
            )
        except SandboxError as exc:
            append_log(self.log_path, f"could not start: {exc}\n# exit 127\n")
            return StepResult(tuple(argv), 127, str(exc), False, 0.0)
        decisions = self._proxy.decisions[seen:] if self._proxy is not None else []
        output = "".join(f"{d.line()}\n" for d in decisions) + done.stdout + done.stderr
        status = f"# exit {done.exit_code}{' (timed out)' if done.timed_out else ''}\n"
        append_log(self.log_path, output + ("" if output.endswith("\n") else "\n") + status)
        return StepResult(
            tuple(argv), done.exit_code, output, done.timed_out, done.duration_s, done.stdout
        )

    def close(self) -> None:
        """Stop the proxy and remove the copy and the private directories."""
        self._stack.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


@contextlib.contextmanager
def install_space(
    project: Path,
    tmp: Path,
    final: Path,
    log_path: Path,
    *,
    sandbox: SandboxSettings,
    allow_hosts: Sequence[str] | None,
    tool_dirs: Sequence[str],
) -> Iterator[InstallSpace]:
    """An :class:`InstallSpace` for the body, removed afterwards."""
    space = InstallSpace(
        project,
        tmp,
        final,
        log_path,
        sandbox=sandbox,
        allow_hosts=allow_hosts,
        tool_dirs=tool_dirs,
    )
    try:
        yield space
    finally:
        space.close()
