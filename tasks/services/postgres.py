"""A throwaway PostgreSQL server: ``initdb`` in the run's private directory, ``postgres`` on a
Unix socket only (no TCP), trust authentication (only the socket's directory owner can reach
it), durability off (a test database is never worth an fsync). On this machine or in a
container next to the docker sandbox's (:mod:`tasks.services.launch`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time

from tasks.services.binaries import Server, ServiceError
from tasks.services.identity import Identity, RunDirs, make_data_dir
from tasks.services.launch import Handle, HostLauncher, Launcher

log = logging.getLogger(__name__)

SUPERUSER = "autopilot"
PORT = 5432
#: Settings for a disposable server: no TCP, no durability, small memory.
SERVER_OPTIONS = (
    "listen_addresses=",
    "unix_socket_permissions=0777",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=32MB",
    "max_connections=60",
    "log_min_messages=warning",
)


class Postgres:
    """One PostgreSQL server of one run."""

    def __init__(
        self, server: Server, dirs: RunDirs, identity: Identity, launcher: Launcher | None = None
    ) -> None:
        self.server = server
        self.dirs = dirs
        self.identity = identity
        self.launcher = launcher or HostLauncher(identity)
        self.data = dirs.data("postgres")
        self.log_path = dirs.logs / "postgres.log"
        self.proc: Handle | None = None

    @property
    def host(self) -> str:
        """The socket directory (libpq's host for a Unix socket)."""
        return str(self.dirs.sock)

    def url(self, database: str) -> str:
        """``DATABASE_URL`` for `database` on this server."""
        # No authority part: Ruby's URI (Rails) refuses "user@" without a host.
        return f"postgresql:///{database}?host={self.host}&port={PORT}&user={SUPERUSER}"

    def env(self, database: str) -> dict[str, str]:
        """Variables a test run uses to reach `database`."""
        return {
            "DATABASE_URL": self.url(database),
            "PGHOST": self.host,
            "PGPORT": str(PORT),
            "PGUSER": SUPERUSER,
            "PGDATABASE": database,
        }

    def start(self, timeout_s: float) -> None:
        """initdb and start; returns when the server accepts connections.

        Raises:
            ServiceError: initdb failed, the server exited, or it did not answer in time
                (one line with the server's last log line).
        """
        make_data_dir(self.dirs, "postgres", self.identity)
        initdb = os.path.join(self.server.bindir, "initdb")
        argv = [initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"]
        argv += ["--locale=C", "--no-sync", "--no-instructions"]
        done = self.launcher.run(argv, env={}, timeout_s=timeout_s, as_server=True)
        if done.returncode != 0:
            raise ServiceError(f"postgres: initdb failed: {_last(done.stderr or done.stdout)}")
        options = [arg for opt in SERVER_OPTIONS for arg in ("-c", opt)]
        argv = [self.server.program, "-D", str(self.data), "-k", self.host, "-p", str(PORT)]
        self.proc = self.launcher.start([*argv, *options], log=self.log_path, cwd=self.data)
        self._wait_ready(timeout_s)
        log.info("postgres %s started on %s", self.server.version, self.host)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServiceError(f"postgres exited at start: {self.last_log_line()}")
            if self.psql("select 1", "postgres", check=False).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"postgres did not accept connections within {timeout_s:.0f} s: "
                    f"{self.last_log_line()}"
                )
            time.sleep(0.1)

    def psql(
        self, sql: str, database: str, *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run `sql` in `database` as the superuser (through the socket)."""
        psql = os.path.join(self.server.bindir, "psql")
        argv = [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(PORT)]
        argv += ["-U", SUPERUSER, "-d", database, "-tA", "-c", sql]
        done = self.launcher.run(argv, env={"PGCONNECT_TIMEOUT": "5"}, timeout_s=120)
        if check and done.returncode != 0:
            raise ServiceError(f"postgres: {sql.split()[0]} failed: {_last(done.stderr)}")
        return done

    def create_database(self, name: str, template: str | None = None) -> None:
        """CREATE DATABASE `name` (a copy of `template` when given)."""
        sql = f'CREATE DATABASE "{name}"'
        if template is not None:
            sql += f' TEMPLATE "{template}"'
        self.psql(sql, "postgres")

    def stop(self, grace_s: float = 10.0) -> None:
        """Fast shutdown, then kill what is left working in the data directory."""
        if self.proc is not None:
            self.proc.stop(signal.SIGINT, grace_s)

    def last_log_line(self) -> str:
        """The server log's last line (what it said before failing)."""
        try:
            return _last(self.log_path.read_text("utf-8", errors="replace"))
        except OSError:
            return "no log"


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def database_name(base: str, job: str) -> str:
    """A valid, short database name for `job` of the template `base`."""
    safe = "".join(c if c.isalnum() else "_" for c in job.lower())[:20]
    return f"{base}_{safe}"
