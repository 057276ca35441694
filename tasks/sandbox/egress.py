"""The egress proxy: the only way out of an install step's sandbox, on the operator's rule.

An install step's sandbox has a network namespace of its own (loopback only). Its command is
started by a small forwarder (``resources/egress_forward.py``) that listens on the sandbox's
loopback, points the package tools at it (``HTTP(S)_PROXY``) and carries every connection over
a Unix socket to this proxy, on the host, which speaks HTTP proxy: ``CONNECT host:port`` (TLS
stays end to end) and plain ``GET http://...``. Each destination is checked by
:class:`tasks.sandbox.egress_policy.EgressPolicy`; a refused one gets ``403`` with the reason,
and every decision is kept for the build log. So a project's install code reaches the
registries (the public internet, or the operator's list) but never the host's loopback
services (Prefect's API and its Secret blocks, an S3 server, a Docker TCP socket), the
metadata service or the internal network, whatever it does: a direct connection has no route.

When the host itself goes out through a proxy (``HTTPS_PROXY`` in Autopilot's environment),
allowed tunnels are chained through it; the address check then applies to IP literals only
(the upstream proxy resolves names).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import logging
import os
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from tasks.sandbox.egress_policy import EgressPolicy, IPAddress

log = logging.getLogger(__name__)

SOCKET_NAME = "proxy.sock"
#: Most bytes of a request head (request line and headers) the proxy reads.
MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT_S = 30.0
_CHUNK = 64 * 1024


@dataclass
class Decision:
    """One destination an install step asked for, and whether it got it."""

    host: str
    port: int
    allowed: bool
    reason: str = ""

    def line(self) -> str:
        verdict = "allowed" if self.allowed else f"refused ({self.reason})"
        return f"egress {self.host}:{self.port} {verdict}"


@dataclass
class EgressProxy:
    """A running proxy: its socket's directory (shown to the sandbox) and its decisions."""

    socket_dir: str
    policy: EgressPolicy
    decisions: list[Decision] = field(default_factory=list)
    upstream: str | None = None

    @property
    def socket_path(self) -> str:
        return os.path.join(self.socket_dir, SOCKET_NAME)

    def record(self, decision: Decision) -> None:
        self.decisions.append(decision)
        (log.info if decision.allowed else log.warning)("install step: %s", decision.line())


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_HEAD:
            raise ValueError("request head too large")
    return data


def _target(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, the request to send upstream: b'' for CONNECT)."""
    text, _, rest = head.partition(b"\r\n\r\n")
    lines = text.decode("latin-1").split("\r\n")
    method, uri, version = ([*lines[0].split(" "), "", ""])[:3]
    if method == "CONNECT":
        host, _, port = uri.rpartition(":")
        return method, host.strip("[]"), int(port), b""
    parts = urlsplit(uri)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not a proxy request: {lines[0][:80]}")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    headers = [
        h
        for h in lines[1:]
        if h and not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))
    ]
    request = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    return method, parts.hostname, parts.port or 80, request.encode("latin-1") + rest


def _refuse(conn: socket.socket, reason: str) -> None:
    body = f"refused by Autopilot's install egress: {reason}\n".encode()
    head = f"HTTP/1.1 403 Forbidden\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(OSError):
        conn.sendall(head.encode() + body)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(_CHUNK):
                dst.sendall(chunk)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join(timeout=CONNECT_TIMEOUT_S)


def _resolve(host: str, port: int) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos))


def _connect_direct(proxy: EgressProxy, host: str, port: int) -> socket.socket | str:
    """A connection to the first permitted address of `host`, or why none is permitted."""
    try:
        addresses = _resolve(host, port)
    except (OSError, UnicodeError) as exc:
        return f"cannot resolve {host}: {exc}"
    for addr in addresses:
        # Every address must be permitted: a name that also points inward is refused.
        why = proxy.policy.refuse_address(host, port, addr)
        if why:
            return f"{host} resolves to {addr}: {why}"
    try:
        return socket.create_connection((str(addresses[0]), port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        return f"cannot connect: {exc.strerror or exc}"


def _connect_upstream(proxy: EgressProxy, host: str, port: int) -> socket.socket | str:
    """A tunnel to `host:port` through the host's own proxy, or why not."""
    assert proxy.upstream is not None
    with contextlib.suppress(ValueError):
        why = proxy.policy.refuse_address(host, port, ipaddress.ip_address(host))
        if why:
            return why
    up = urlsplit(proxy.upstream)
    try:
        conn = socket.create_connection(
            (up.hostname or "", up.port or 3128), timeout=CONNECT_TIMEOUT_S
        )
    except OSError as exc:
        return f"cannot reach the upstream proxy: {exc.strerror or exc}"
    auth = ""
    if up.username:
        pair = f"{unquote(up.username)}:{unquote(up.password or '')}".encode()
        auth = f"Proxy-Authorization: Basic {base64.b64encode(pair).decode()}\r\n"
    conn.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}\r\n".encode())
    status = _read_head(conn).split(b"\r\n", 1)[0].decode("latin-1")
    if status.split(" ")[1:2] != ["200"]:
        conn.close()
        return f"upstream proxy said {status[:80]}"
    return conn


def _handle(proxy: EgressProxy, conn: socket.socket) -> None:
    try:
        method, host, port, request = _target(_read_head(conn))
    except (ValueError, OSError, IndexError) as exc:
        _refuse(conn, f"bad request: {exc}")
        return
    why = proxy.policy.refuse_name(host, port)
    upstream: socket.socket | str = why or ""
    if not why:
        if proxy.upstream is not None:
            upstream = _connect_upstream(proxy, host, port)
        else:
            upstream = _connect_direct(proxy, host, port)
    if isinstance(upstream, str):
        proxy.record(Decision(host, port, False, upstream))
        _refuse(conn, upstream)
        return
    proxy.record(Decision(host, port, True))
    with upstream:
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(request)
        upstream.settimeout(None)
        _splice(conn, upstream)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    proxy: EgressProxy


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(CONNECT_TIMEOUT_S)
        _handle(self.server.proxy, conn)


def host_upstream() -> str | None:
    """The proxy the host itself goes out through (``HTTPS_PROXY``), if any."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        value = os.environ.get(name, "").strip()
        if value.startswith("http://"):
            return value
    return None


@contextlib.contextmanager
def egress_proxy(policy: EgressPolicy, upstream: str | None = None) -> Iterator[EgressProxy]:
    """Run a proxy on a Unix socket in a private directory for the body's install steps."""
    # A Unix socket's path is at most 107 bytes: /tmp rather than a long TMPDIR when it can.
    short = "/tmp" if os.access("/tmp", os.W_OK) else None
    directory = tempfile.mkdtemp(prefix="autopilot-egress-", dir=short)
    proxy = EgressProxy(socket_dir=directory, policy=policy, upstream=upstream)
    server = _Server(proxy.socket_path, _Handler)
    server.proxy = proxy
    thread = threading.Thread(target=server.serve_forever, name="egress-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        shutil.rmtree(directory, ignore_errors=True)
