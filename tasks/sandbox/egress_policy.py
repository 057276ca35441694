"""Which destinations an install step may reach: the rule the egress proxy applies.

The install step runs a project's own code (setup.py, PEP 517 backends, gem extensions) with
the network, so the network it gets is a choice of the operator, never of the repository:

- with ``[envs] allow_hosts`` unset, any host whose every address is public: never the host's
  loopback, the link-local range (a cloud's metadata service), the private and shared networks
  (RFC 1918, carrier-grade NAT, unique-local IPv6), multicast, reserved or unspecified
  addresses, nor any address of the host's own interfaces (a service listening on all of
  them); a registry, its file server and a native library's download stay reachable;
- with ``allow_hosts`` set (names or ``*.`` suffix patterns, an optional ``:port``), only
  those hosts, at whatever address they have (an internal mirror), and nothing else.

Ports are 443 and 80 unless an allowed entry names another. An address is checked after the
proxy resolves the name itself, and the connection goes to that checked address (a name that
resolves differently the second time gains nothing).
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Ports an install may reach on a host no entry names a port for.
DEFAULT_PORTS = frozenset({80, 443})
#: Networks no install may reach unless the operator names the host: (network, why).
BLOCKED_NETWORKS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "the host's loopback"),
    ("10.0.0.0/8", "a private network"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) network"),
    ("169.254.0.0/16", "link-local (a cloud metadata service)"),
    ("172.16.0.0/12", "a private network"),
    ("192.168.0.0/16", "a private network"),
    ("192.0.0.0/24", "reserved for protocol assignments"),
    ("198.18.0.0/15", "reserved for benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "the host's loopback"),
    ("fc00::/7", "a private (unique-local) network"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
_HOST = re.compile(r"^(?:\*\.)?[A-Za-z0-9_.-]+$|^\[[0-9A-Fa-f:.]+\]$")


@functools.cache
def _blocked() -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in BLOCKED_NETWORKS)


def _embedded_v4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64 well-known prefix)."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def address_refusal(addr: IPAddress, own: Iterable[IPAddress] = ()) -> str | None:
    """Why `addr` is not public (None when it is); `own` are the host's own addresses."""
    candidates: list[IPAddress] = [addr]
    inner = _embedded_v4(addr)
    if inner is not None:
        candidates.append(inner)
    own_set = set(own)
    for candidate in candidates:
        if candidate in own_set:
            return "an address of this host"
        for network, why in _blocked():
            if candidate.version == network.version and candidate in network:
                return why
    return None


def parse_allowed(entries: Sequence[str]) -> list[tuple[str, int | None]]:
    """``allow_hosts`` entries as (host pattern, port or None).

    Raises:
        ValueError: an entry that is not a host name, a ``*.`` pattern or an IP literal,
            optionally followed by ``:port``.
    """
    parsed: list[tuple[str, int | None]] = []
    for entry in entries:
        text = entry.strip().lower()
        host, port = text, None
        m = re.fullmatch(r"(.+):(\d{1,5})", text)
        if m and not (text.count(":") > 1 and not text.startswith("[")):
            host, port = m.group(1), int(m.group(2))
        if not _HOST.match(host) or (port is not None and not 0 < port < 65536):
            raise ValueError(f"{entry!r}: expected a host name, '*.suffix' or an IP, with :port")
        parsed.append((host.strip("[]"), port))
    return parsed


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's rule for one install step (see the module docstring)."""

    allow_hosts: tuple[str, ...] | None = None
    own_addresses: frozenset[IPAddress] = field(default_factory=frozenset)

    def allowed_entry(self, host: str, port: int) -> bool | None:
        """True when an ``allow_hosts`` entry names `host:port`, False when the list exists
        and none does, None without a list."""
        if self.allow_hosts is None:
            return None
        host = host.lower().strip("[]")
        for pattern, entry_port in parse_allowed(self.allow_hosts):
            if not fnmatch.fnmatchcase(host, pattern):
                continue
            if (entry_port is None and port in DEFAULT_PORTS) or entry_port == port:
                return True
        return False

    def refuse_name(self, host: str, port: int) -> str | None:
        """Why `host:port` is refused before any lookup, or None to go on and resolve it."""
        named = self.allowed_entry(host, port)
        if named is False:
            return "not in [envs] allow_hosts"
        if named is None and port not in DEFAULT_PORTS:
            return f"port {port} (only {', '.join(map(str, sorted(DEFAULT_PORTS)))})"
        if named is None and host.lower().rstrip(".") in ("localhost", "localhost.localdomain"):
            return "the host's loopback"
        return None

    def refuse_address(self, host: str, port: int, addr: IPAddress) -> str | None:
        """Why connecting to `addr` (what `host` resolved to) is refused, or None."""
        if self.allowed_entry(host, port):
            return None  # the operator named this host: an internal mirror is fine
        return address_refusal(addr, self.own_addresses)


def host_addresses(
    fib_trie: str = "/proc/net/fib_trie", inet6: str = "/proc/net/if_inet6"
) -> frozenset[IPAddress]:
    """The addresses of this host's own interfaces (IPv4 local routes and IPv6 addresses), read
    from /proc; empty when unreadable."""
    found: set[IPAddress] = set()
    try:
        lines = Path(fib_trie).read_text("ascii", errors="replace").splitlines()
    except OSError:
        lines = []
    for prev, line in itertools.pairwise(lines):
        m = re.search(r"\|--\s+(\d+\.\d+\.\d+\.\d+)", prev)
        if m and "/32 host LOCAL" in line:
            found.add(ipaddress.IPv4Address(m.group(1)))
    try:
        rows = Path(inet6).read_text("ascii", errors="replace").splitlines()
    except OSError:
        rows = []
    for row in rows:
        raw = row.split()[0] if row.split() else ""
        if len(raw) == 32:
            found.add(ipaddress.IPv6Address(int(raw, 16)))
    return frozenset(found)
