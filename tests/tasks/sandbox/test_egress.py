"""The install step's only way out: the egress rule, and the proxy run for real behind bwrap
(a sandboxed process reaches what the operator allows through the proxy, nothing else, and
never anything directly)."""

from __future__ import annotations

import http.server
import ipaddress
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.egress import EgressProxy, egress_proxy
from tasks.sandbox.egress_policy import EgressPolicy, address_refusal, host_addresses, parse_allowed
from tasks.sandbox.make import make_runner

IP = ipaddress.ip_address


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.20.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "shared"),
        ("169.254.169.254", "metadata"),
        ("fe80::1", "link-local"),
        ("fd00::5", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
    ],
)
def test_inward_addresses_are_refused(address: str, why: str) -> None:
    reason = address_refusal(IP(address))
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", ["8.8.8.8", "203.0.113.80", "2001:4860:4860::8888"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_refusal(IP(address)) is None


def test_the_hosts_own_addresses_are_refused() -> None:
    own = frozenset({IP("198.51.100.7")})
    assert address_refusal(IP("198.51.100.7"), own) == "an address of this host"
    assert address_refusal(IP("198.51.100.8"), own) is None


def test_ports_and_names() -> None:
    open_policy = EgressPolicy()
    assert open_policy.refuse_name("files.example", 443) is None
    assert open_policy.refuse_name("files.example", 80) is None
    assert "port 22" in (open_policy.refuse_name("files.example", 22) or "")
    assert "loopback" in (open_policy.refuse_name("LOCALHOST.", 443) or "")
    listed = EgressPolicy(allow_hosts=("*.mirror.example", "10.0.0.7:8080"))
    assert listed.refuse_name("a.mirror.example", 443) is None
    assert "allow_hosts" in (listed.refuse_name("mirror.example", 443) or "")
    assert "allow_hosts" in (listed.refuse_name("files.example", 443) or "")
    assert listed.refuse_name("10.0.0.7", 8080) is None
    assert "allow_hosts" in (listed.refuse_name("10.0.0.7", 443) or "")
    # A host the operator named may be internal (a mirror); without a list, a name that
    # resolves inward is refused by its address.
    assert listed.refuse_address("10.0.0.7", 8080, IP("10.0.0.7")) is None
    assert listed.refuse_address("a.mirror.example", 443, IP("10.9.9.9")) is None
    assert open_policy.refuse_address("files.example", 443, IP("10.9.9.9")) is not None
    with pytest.raises(ValueError):
        parse_allowed(["not a host"])
    assert parse_allowed(["[fd00::1]:8443", "Mirror.Example"]) == [
        ("fd00::1", 8443),
        ("mirror.example", None),
    ]


def test_host_addresses_read_from_proc(tmp_path: Path) -> None:
    fib = tmp_path / "fib_trie"
    fib.write_text(
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n"
        "     |-- 198.51.100.7\n        /32 host LOCAL\n     |-- 198.51.100.255\n"
        "        /32 link BROADCAST\n"
    )
    inet6 = tmp_path / "if_inet6"
    inet6.write_text("fd000000000000000000000000000002 02 40 00 80 eth0\n")
    assert host_addresses(str(fib), str(inet6)) == {IP("198.51.100.7"), IP("fd00::2")}
    assert host_addresses(str(tmp_path / "none"), str(tmp_path / "none")) == frozenset()


# --- the proxy, for real, behind bwrap -------------------------------------------------------

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[tuple[int, list[str]]]:
    """An HTTP server on the host's loopback, recording its visitors."""
    seen: list[str] = []

    class Handler(_Hello):
        def do_GET(self) -> None:
            seen.append(self.path)
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1], seen
    srv.shutdown()
    srv.server_close()


#: Runs in the sandbox: a GET through the proxy the forwarder set, a CONNECT tunnel, and a
#: direct connection; prints one line for each.
CLIENT = """
import os, socket, sys, urllib.request
port = int(sys.argv[1])
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/via-get", timeout=20).read()
    print("GET", body.decode())
except Exception as exc:
    print("GET failed", exc)
proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
s = socket.create_connection((proxy[0][7:], int(proxy[1])), timeout=20)
s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n".encode())
answer = s.recv(4096).decode(errors="replace")
print("CONNECT", answer.splitlines()[0] if answer else "closed")
if " 200 " in answer:
    s.sendall(b"GET /via-connect HTTP/1.0\\r\\n\\r\\n")
    reply = b""
    while chunk := s.recv(4096):  # HTTP/1.0: the server closes after its answer
        reply += chunk
    print("TUNNEL", reply.decode(errors="replace").splitlines()[-1])
try:
    socket.create_connection(("127.0.0.1", port), timeout=3)
    print("DIRECT connected")
except OSError as exc:
    print("DIRECT", type(exc).__name__)
"""


def _run_client(tmp_path: Path, proxy: EgressProxy, port: int) -> str:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=60), root, egress=proxy, inherit_context=False
    )
    done = runner.run(["python3", "-c", CLIENT, str(port)], cwd=root)
    assert done.exit_code == 0, done.stderr
    return done.stdout


@needs_bwrap
@pytest.mark.slow
def test_what_the_operator_allows_is_reached_through_the_proxy_only(
    tmp_path: Path, web: tuple[int, list[str]]
) -> None:
    port, seen = web
    with egress_proxy(EgressPolicy(allow_hosts=(f"127.0.0.1:{port}",))) as proxy:
        out = _run_client(tmp_path, proxy, port)
    assert "GET hello from the host" in out
    assert "CONNECT HTTP/1.1 200" in out and "TUNNEL hello from the host" in out
    assert "DIRECT OSError" in out or "DIRECT ConnectionRefusedError" in out, out
    assert "DIRECT connected" not in out
    assert seen == ["/via-get", "/via-connect"]
    assert [d.allowed for d in proxy.decisions] == [True, True]


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize(
    ("allow", "reason"),
    [(None, "only 80, 443"), (("files.example",), "not in [envs] allow_hosts")],
)
def test_the_hosts_services_are_refused(
    tmp_path: Path, web: tuple[int, list[str]], allow: tuple[str, ...] | None, reason: str
) -> None:
    port, seen = web
    with egress_proxy(EgressPolicy(allow_hosts=allow, own_addresses=host_addresses())) as proxy:
        out = _run_client(tmp_path, proxy, port)
    assert "GET failed HTTP Error 403" in out
    assert "CONNECT HTTP/1.1 403 Forbidden" in out
    assert "DIRECT connected" not in out
    assert seen == []
    assert proxy.decisions and all(not d.allowed and reason in d.reason for d in proxy.decisions)


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "0x7f.1", "LOCALHOST"])
def test_inward_destinations_are_refused_on_the_proxys_socket(host: str) -> None:
    # What a hostile install would send the proxy itself: an IP literal on an allowed port
    # (refused by its address once resolved), a spelling of loopback, the name.
    policy = EgressPolicy(own_addresses=host_addresses())
    with egress_proxy(policy) as proxy, socket.socket(socket.AF_UNIX) as s:
        s.connect(proxy.socket_path)
        s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\n\r\n".encode())
        answer = s.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 403"), answer
    assert len(proxy.decisions) == 1 and not proxy.decisions[0].allowed


def test_allowed_tunnels_chain_through_the_hosts_own_proxy(web: tuple[int, list[str]]) -> None:
    port, seen = web
    asked: list[bytes] = []
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen()

    def serve_once() -> None:
        conn, _ = upstream.accept()
        head = conn.recv(4096)
        asked.append(head.split(b"\r\n")[0])
        target = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        conn.settimeout(10)
        target.sendall(conn.recv(4096))
        conn.sendall(target.recv(4096))
        target.close()
        conn.close()

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    up_url = f"http://user:pw@127.0.0.1:{upstream.getsockname()[1]}"
    policy = EgressPolicy(allow_hosts=(f"registry.example:{port}",))
    with egress_proxy(policy, upstream=up_url) as proxy, socket.socket(socket.AF_UNIX) as s:
        s.connect(proxy.socket_path)
        s.sendall(f"CONNECT registry.example:{port} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /chained HTTP/1.0\r\n\r\n")
        reply = s.recv(4096)
    thread.join(timeout=10)
    upstream.close()
    assert asked == [f"CONNECT registry.example:{port} HTTP/1.1".encode()]
    assert reply.startswith(b"HTTP/1.0 200") and seen == ["/chained"]
