"""Which user the servers run as, and the directory layout that lets only the sandbox in.

PostgreSQL refuses to run as root. As root, the servers run as the ``postgres`` system user
(Debian's package makes it), or ``nobody`` when it is absent, through ``setpriv`` (no PAM, no
login shell: works in containers and CI). As any other user they run as that user.

Layout of one run's private directory (``/tmp/ap-svc-*``, short: socket paths are limited to
107 bytes): the base and ``sock/`` belong to the invoking user with the server's group
(``0710`` and ``0770``), the data directories to the server's user (``0700``). So the sandbox,
which runs as the invoking user without any capability, reaches the sockets as their
directory's owner; the server writes its sockets through its group; other users of the host
reach nothing. Only ``sock/`` is ever shown to a sandbox.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tasks.services.binaries import ServiceError


@dataclass(frozen=True)
class Identity:
    """The user and group the servers run as."""

    user: str
    uid: int
    gid: int

    @property
    def switches(self) -> bool:
        """Whether starting a server means changing user (Autopilot runs as root)."""
        return self.uid != os.geteuid()

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` run as this identity (through ``setpriv`` when the user changes)."""
        if not self.switches:
            return argv
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ServiceError("setpriv (util-linux) is needed to run servers as root")
        return [
            setpriv,
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--",
            *argv,
        ]


def server_identity() -> Identity:
    """Ourselves, or (as root) ``postgres`` or else ``nobody``."""
    if os.geteuid() != 0:
        return Identity(pwd.getpwuid(os.geteuid()).pw_name, os.geteuid(), os.getegid())
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return Identity(name, entry.pw_uid, entry.pw_gid)
    raise ServiceError("running as root and neither a postgres nor a nobody user exists")


@dataclass(frozen=True)
class RunDirs:
    """One run's private directory: ``base``, ``sock`` (shown to sandboxes) and ``logs``."""

    base: Path

    @property
    def sock(self) -> Path:
        return self.base / "sock"

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    def data(self, name: str) -> Path:
        return self.base / name


def make_run_dirs(identity: Identity, parent: str | None = None) -> RunDirs:
    """Create the private directories for one run (see the module docstring)."""
    base = Path(tempfile.mkdtemp(prefix="ap-svc-", dir=parent or "/tmp"))
    dirs = RunDirs(base)
    for sub in (dirs.sock, dirs.logs):
        sub.mkdir()
    if identity.switches:
        # The group name is only for the error message of a broken passwd/group database.
        grp.getgrgid(identity.gid)
        for path, mode in ((base, 0o710), (dirs.sock, 0o770), (dirs.logs, 0o770)):
            os.chown(path, os.geteuid(), identity.gid)
            path.chmod(mode)
    else:
        base.chmod(0o700)
        dirs.sock.chmod(0o700)
    return dirs


def make_data_dir(dirs: RunDirs, name: str, identity: Identity) -> Path:
    """``<base>/<name>``, owned by the server's user, mode 0700."""
    path = dirs.data(name)
    path.mkdir(mode=0o700)
    if identity.switches:
        os.chown(path, identity.uid, identity.gid)
    return path
