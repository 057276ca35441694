"""What a bwrap sandbox shows of the host: deny by default, exact directories, never a home.

The view is built from nothing (bwrap starts from an empty root) and holds only:

- the system's program and library trees (``/usr``; ``/bin``, ``/sbin``, ``/lib*`` as the links
  or directories they are on the host), read-only;
- the part of ``/etc`` programs need (:data:`ETC_ENTRIES`: the loader, certificates,
  alternatives, time zone, users and groups, name service, MIME and locale tables, the
  toolchains' own configuration), as one read-only snapshot taken once per process; never
  shadow files, ssh, sudoers, TLS private keys or package manager credentials (``pip.conf``,
  ``npmrc``);
- the toolchains' own ``/var/lib`` trees (:data:`VAR_ENTRIES`, Debian's gem directory);
- a private ``/dev``, ``/proc`` (own pid namespace; ``/proc/sys`` read-only, the kernel's
  sensitive files masked) and ``/tmp`` (a size-limited tmpfs with the private HOME);
- the toolchains' directories, each bound by its exact path (a virtualenv, a pyenv interpreter,
  a project's interpreter, Autopilot's prepared environments ``$AUTOPILOT_HOME/envs/<name>``);
- what the project declared (``[sandbox] read_only``), read-only;
- the worktree, writable, last.

So ``/root``, ``/home``, ``/run``, ``/var/run``, ``/mnt``, ``/media``, ``/srv``, ``/opt``, the
rest of ``/var`` and every host Unix socket are simply absent.
:mod:`tasks.core.host_paths` is the one rule saying which directories may never be shown (the
configuration validates declared paths with it at load, and the sandbox checks every bind with
it again: declared paths also for the sockets and credentials they hold).
"""

from __future__ import annotations

import atexit
import configparser
import fnmatch
import functools
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tasks.core.host_paths import declared_reason, forbidden_reason, within

#: The system's program and library trees.
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Entries of /etc that programs need (names or fnmatch patterns), read-only.
ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "pki",
    "ssl",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "gai.conf",
    "services",
    "protocols",
    "mime.types",
    "magic",
    "magic.mime",
    "locale.alias",
    "locale.conf",
    "os-release",
    "debian_version",
    "lsb-release",
    "shells",
    "terminfo",
    "mtab",
    "gemrc",
    "ruby",
    "rubocop",
    "python3*",
)
#: Never shown, even inside an entry of ETC_ENTRIES: private keys of the system's TLS setup.
ETC_EXCLUDED = ("ssl/private", "pki/tls/private", "pki/CA/private")
#: The toolchains' own trees under /var (Debian's system gem directory).
VAR_ENTRIES = ("/var/lib/gems",)
#: Kernel files of /proc that no test needs: masked (Docker masks the same ones).
PROC_MASKED_FILES = ("kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug")
PROC_MASKED_DIRS = ("acpi", "asound", "scsi")
#: Parts of /proc kept read-only: a uid-0 sandbox could otherwise write the host's sysctls
#: (bwrap 0.8 covers /proc/irq and /proc/bus itself, but skips these when run as root).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "fs")

MountKind = Literal["ro", "rw", "symlink"]


@dataclass(frozen=True)
class Mount:
    """One entry of the view: a read-only or writable bind, or a symbolic link."""

    kind: MountKind
    source: str
    dest: str

    def args(self) -> list[str]:
        """The bwrap options for this entry."""
        option = {"ro": "--ro-bind", "rw": "--bind", "symlink": "--symlink"}[self.kind]
        return [option, self.source, self.dest]


def interpreter_dirs(executable: str) -> list[str]:
    """The exact directories an interpreter at `executable` needs to run in the sandbox.

    Its installation prefix (``<prefix>/bin/<name>``), the prefix its symbolic links lead to,
    and, for a virtualenv, the base interpreter's prefix named by ``pyvenv.cfg`` (``home``).
    System prefixes (``/usr``, ``/``) are left out: the view has them or must not show them.
    """
    if not os.path.isabs(executable):
        return []
    found: dict[str, None] = {}
    for exe in (os.path.abspath(executable), os.path.realpath(executable)):
        prefix = os.path.dirname(os.path.dirname(exe))
        found[prefix] = None
        base = _venv_home(prefix)
        if base is not None:
            found[os.path.dirname(base)] = None
            found[os.path.dirname(os.path.realpath(base))] = None
    return [d for d in found if not _is_system(d)]


def _venv_home(prefix: str) -> str | None:
    """A virtualenv's base interpreter directory (``home`` in its pyvenv.cfg), or None."""
    cfg = Path(prefix) / "pyvenv.cfg"
    if not cfg.is_file():
        return None
    parser = configparser.ConfigParser()
    try:
        parser.read_string("[venv]\n" + cfg.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return None
    home = parser.get("venv", "home", fallback="").strip()
    return home if os.path.isabs(home) else None


def _is_system(path: str) -> bool:
    return path == "/" or any(within(path, tree) for tree in SYSTEM_TREES)


@dataclass
class View:
    """The binds of one sandbox: the system part, the extra directories, the worktree."""

    system: tuple[Mount, ...]
    extra: list[Mount]
    root: Mount
    skipped: list[str] = field(default_factory=list)

    @property
    def mounts(self) -> list[Mount]:
        """Every bind and link, in the order bwrap applies them."""
        return [*self.system, *self.extra, self.root]

    def shows(self, path: str) -> bool:
        """Whether `path` (on the host) is visible at the same place in the sandbox."""
        path = os.path.normpath(path)
        for m in self.mounts:
            if m.kind == "symlink":
                # /bin -> usr/bin: what lies under the link shows when its target does.
                if within(path, m.dest):
                    target = os.path.normpath(os.path.join(os.path.dirname(m.dest), m.source))
                    return self.shows(target + path[len(m.dest) :])
            elif within(path, m.dest):
                # A bind of another directory (the /etc snapshot) shows what that one holds.
                return m.source == m.dest or os.path.lexists(m.source + path[len(m.dest) :])
        return False

    def sandbox_path(self, host_path: str) -> str:
        """`host_path` (a PATH) with only the entries the sandbox can see, in order."""
        entries = [e for e in host_path.split(":") if e and os.path.isabs(e)]
        return ":".join(dict.fromkeys(e for e in entries if self.shows(e)))


def system_mounts() -> tuple[Mount, ...]:
    """The system trees, /etc's needed entries and the toolchains' /var trees, read-only."""
    return (*_trees(), *_etc_mounts(), *_var_trees())


@functools.cache
def _trees() -> tuple[Mount, ...]:
    """/usr, /bin, /lib*... as they are on the host (read once per process)."""
    mounts: list[Mount] = []
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            mounts.append(Mount("symlink", os.readlink(tree), tree))
        elif os.path.isdir(tree):
            mounts.append(Mount("ro", tree, tree))
    return tuple(mounts)


@functools.cache
def _var_trees() -> tuple[Mount, ...]:
    return tuple(Mount("ro", p, p) for p in VAR_ENTRIES if os.path.isdir(p))


def _etc_mounts() -> list[Mount]:
    """/etc as one read-only bind of a snapshot holding only :data:`ETC_ENTRIES`.

    One mount rather than one per entry: bwrap pays about a millisecond per read-only bind (it
    re-reads the mount table for each), and /etc alone would need thirty of them.
    """
    snapshot = etc_snapshot()
    return [Mount("ro", snapshot, "/etc")] if snapshot else []


_SNAPSHOTS: dict[int, str] = {}


def etc_snapshot() -> str | None:
    """A private copy of the needed /etc entries (links kept as links), made once per process
    (again if something removed it) and removed when that process exits; None when /etc
    cannot be read."""
    pid = os.getpid()
    known = _SNAPSHOTS.get(pid)
    if known is not None and os.path.isdir(known):
        return known
    try:
        names = sorted(os.listdir("/etc"))
    except OSError:
        return None
    target = Path(tempfile.mkdtemp(prefix="autopilot-etc-"))
    atexit.register(_remove_snapshot, str(target), pid)
    for name in names:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in ETC_ENTRIES):
            _copy_entry(Path("/etc") / name, target / name)
    target.chmod(0o755)
    _SNAPSHOTS[pid] = str(target)
    return str(target)


def _remove_snapshot(path: str, pid: int) -> None:
    # A forked child inherits the parent's exit handlers: only the maker removes its copy.
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


def _copy_entry(source: Path, dest: Path) -> None:
    def ignore(directory: str, entries: list[str]) -> set[str]:
        rel = os.path.relpath(directory, "/etc")
        return {e for e in entries if os.path.normpath(f"{rel}/{e}") in ETC_EXCLUDED}

    try:
        if source.is_symlink():
            dest.symlink_to(os.readlink(source))
        elif source.is_dir():
            shutil.copytree(source, dest, symlinks=True, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, dest)
    except OSError:
        pass  # an entry this user cannot read is simply not shown


@functools.cache
def _proc_args(writable_sys: bool) -> tuple[str, ...]:
    return tuple(_build_proc_args(writable_sys=writable_sys))


def proc_args(*, writable_sys: bool = False) -> list[str]:
    """A private /proc with /proc/sys read-only (or a separate writable mount, for the setup
    step that lowers pid_max and then makes it read-only itself) and kernel files masked."""
    return list(_proc_args(writable_sys))


def _build_proc_args(*, writable_sys: bool) -> list[str]:
    args = ["--proc", "/proc"]
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            args += ["--bind" if writable_sys and name == "sys" else "--ro-bind", path, path]
    for name in PROC_MASKED_FILES:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    for name in PROC_MASKED_DIRS:
        if os.path.isdir(f"/proc/{name}"):
            args += ["--tmpfs", f"/proc/{name}"]
    return args


def extra_mounts(dirs: Iterable[str], *, allow_envs: bool) -> tuple[list[Mount], list[str]]:
    """Read-only binds of `dirs` (exact paths, parents first), and the refused ones with why.

    Paths that do not exist, that the system view already shows, or that the rule refuses
    are left out: :func:`forbidden_reason` for Autopilot's own directories (`allow_envs`),
    :func:`declared_reason` (what they hold too: sockets, credentials) for declared ones.
    """
    mounts: list[Mount] = []
    refused: list[str] = []
    for path in sorted(dict.fromkeys(os.path.normpath(d) for d in dirs), key=len):
        if _is_system(path) or not os.path.exists(path):
            continue
        reason = forbidden_reason(path, allow_envs=True) if allow_envs else declared_reason(path)
        if reason:
            refused.append(reason)
            continue
        mounts.append(Mount("ro", path, path))
    return mounts, refused


def build_view(
    root: str, *, toolchain_dirs: Sequence[str] = (), declared: Sequence[str] = ()
) -> View:
    """The view of one sandbox over the worktree `root` (see the module docstring).

    `toolchain_dirs` are bound by Autopilot (its prepared environments are allowed);
    `declared` are the project's ``[sandbox] read_only`` paths. Both go after the private /tmp
    (a virtualenv may live under /tmp) and before the worktree, which is bound last so that it
    stays writable inside a read-only parent.
    """
    tools, refused_tools = extra_mounts(toolchain_dirs, allow_envs=True)
    own, refused_declared = extra_mounts(declared, allow_envs=False)
    seen = {m.dest for m in tools}
    extra = sorted(tools + [m for m in own if m.dest not in seen], key=lambda m: len(m.dest))
    return View(
        system=system_mounts(),
        extra=extra,
        root=Mount("rw", root, root),
        skipped=refused_tools + refused_declared,
    )
