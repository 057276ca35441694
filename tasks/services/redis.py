"""A throwaway Redis server: a Unix socket only (``port 0``), no persistence."""

from __future__ import annotations

import logging
import signal
import socket
import time

from tasks.services.binaries import Server, ServiceError
from tasks.services.identity import Identity, RunDirs, make_data_dir
from tasks.services.launch import Handle, HostLauncher, Launcher

log = logging.getLogger(__name__)

#: Redis has 16 numbered databases: parallel jobs share them round-robin.
DATABASES = 16


class Redis:
    """One Redis server of one run."""

    def __init__(
        self, server: Server, dirs: RunDirs, identity: Identity, launcher: Launcher | None = None
    ) -> None:
        self.server = server
        self.dirs = dirs
        self.identity = identity
        self.launcher = launcher or HostLauncher(identity)
        self.data = dirs.data("redis")
        self.socket = dirs.sock / "redis.sock"
        self.log_path = dirs.logs / "redis.log"
        self.proc: Handle | None = None

    def env(self, db: int = 0) -> dict[str, str]:
        """``REDIS_URL`` for numbered database `db`."""
        return {"REDIS_URL": f"unix://{self.socket}?db={db % DATABASES}"}

    def start(self, timeout_s: float) -> None:
        """Start and wait for PONG.

        Raises:
            ServiceError: the server exited or did not answer in time (one line).
        """
        make_data_dir(self.dirs, "redis", self.identity)
        argv = [
            self.server.program,
            "--port",
            "0",
            "--unixsocket",
            str(self.socket),
            "--unixsocketperm",
            "777",
            "--dir",
            str(self.data),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--databases",
            str(DATABASES),
        ]
        self.proc = self.launcher.start(argv, log=self.log_path, cwd=self.data)
        deadline = time.monotonic() + timeout_s
        while not self.ping():
            if self.proc.poll() is not None:
                raise ServiceError(f"redis exited at start: {self.last_log_line()}")
            if time.monotonic() > deadline:
                raise ServiceError(f"redis did not answer within {timeout_s:.0f} s")
            time.sleep(0.05)
        log.info("redis %s started on %s", self.server.version, self.socket)

    def command(self, *args: str) -> bytes:
        """Send one command (RESP) and return the raw reply."""
        payload = f"*{len(args)}\r\n".encode()
        for arg in args:
            data = arg.encode()
            payload += b"$%d\r\n%s\r\n" % (len(data), data)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.socket))
            sock.sendall(payload)
            return sock.recv(65536)

    def ping(self) -> bool:
        try:
            return self.command("PING").startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM (no save), then kill what is left working in the data directory."""
        if self.proc is not None:
            self.proc.stop(signal.SIGTERM, grace_s)

    def last_log_line(self) -> str:
        try:
            lines = self.log_path.read_text("utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1][:300] if lines else "no output"
