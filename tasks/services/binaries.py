"""The servers the machine's packages provide, their versions, and whether a pin is met."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from tasks.core.errors import AutopilotError
from tasks.services.settings import version_spec

_VERSION = re.compile(r"(\d+(?:\.\d+)+|\d+)")


class ServiceError(AutopilotError):
    """A declared service cannot be provided or started; the message is one line."""


@dataclass(frozen=True)
class Server:
    """One installed server: its program and version."""

    name: str
    program: str
    version: Version

    @property
    def bindir(self) -> str:
        return os.path.dirname(self.program)


def _version_of(program: str) -> Version | None:
    try:
        done = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(done.stdout)


def parse_version(text: str) -> Version | None:
    """The version a server's ``--version`` prints (Redis: after ``v=``)."""
    m = _VERSION.search(text.split("v=", 1)[-1] if "v=" in text else text)
    try:
        return Version(m.group(1)) if m else None
    except InvalidVersion:
        return None


def postgres_servers() -> list[Server]:
    """Every PostgreSQL server installed (Debian's ``/usr/lib/postgresql/<major>/bin``, then
    PATH), newest first."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(on_path)
    # The real directory: initdb and psql live beside the server, not beside a link to it.
    return _servers("PostgreSQL", [os.path.realpath(c) for c in candidates])


def redis_servers() -> list[Server]:
    """The Redis server on PATH (Debian's ``redis-server``)."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    return _servers("Redis", [found] if found else [])


def _servers(name: str, programs: list[str]) -> list[Server]:
    # Keyed by the file they run, kept by the name given: redis-server is a link to a
    # multi-call binary that behaves by the name it is started with.
    out: dict[str, Server] = {}
    for program in programs:
        version = _version_of(program)
        if version is not None:
            out.setdefault(os.path.realpath(program), Server(name, program, version))
    return sorted(out.values(), key=lambda s: s.version, reverse=True)


def choose(kind: str, pin: bool | str, servers: list[Server], package: str) -> Server:
    """The newest of `servers` that meets `pin` (``true`` takes the newest).

    Raises:
        ServiceError: none is installed, or none meets the pin (one line naming what is here).
    """
    if not servers:
        raise ServiceError(
            f"[services] {kind}: no {kind} server is installed (install the {package} package)"
        )
    if pin is True:
        return servers[0]
    spec = SpecifierSet(version_spec(str(pin)))
    for server in servers:
        if spec.contains(server.version, prereleases=True):
            return server
    have = ", ".join(f"{s.name} {s.version} ({s.bindir})" for s in servers)
    raise ServiceError(
        f"[services] {kind} = {str(pin)!r} cannot be met: this machine has {have}; "
        f"install a matching {package} or change the pin"
    )
