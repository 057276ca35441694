"""Why an ``npm ci`` failed, in one line (the node-jest rules of :mod:`tasks.envs.classify`).

npm says what went wrong as ``npm error code <CODE>`` followed by lines of its own; the code
decides the cause, the telling line is the message.
"""

from __future__ import annotations

import re

from tasks.envs.classify import no_registry, one
from tasks.envs.types import Cause

_CODE = re.compile(r"^npm (?:error|ERR!) code (?P<code>E[A-Z0-9_]+)\s*$", re.MULTILINE)
_LINE = re.compile(r"^npm (?:error|ERR!) (?P<text>.*\S)\s*$", re.MULTILINE)
_SYNC = re.compile(r"Invalid: lock file's .*|Missing: .* from lock file|can only install .*")
_NOT_FOUND = re.compile(r"'(?P<spec>[^']+)' (?:could not be found|is not in this registry)")
_NO_VERSION = re.compile(r"No matching version found for (?P<spec>\S+?)\.?$", re.MULTILINE)
_WHO = re.compile(
    r"notsup (?:Not compatible with your version of node/npm|Unsupported \w+ for) ?"
    r":? (?P<pkg>\S+)"
)
_NEEDS = re.compile(r"notsup (?:Required|Valid \w+): +(?P<need>.*\S)")
_HAS = re.compile(r"notsup Actual(?: \w+)?: +(?P<has>.*\S)")
#: Codes that mean the registry could not be reached (DNS, refused, reset, timed out).
_NETWORK = frozenset(
    {
        "ENOTFOUND",
        "EAI_AGAIN",
        "ECONNREFUSED",
        "ECONNRESET",
        "ETIMEDOUT",
        "ENETUNREACH",
        "EHOSTUNREACH",
        "ERR_SOCKET_TIMEOUT",
        "ECONNABORTED",
    }
)
_NOISE = ("code ", "errno ", "syscall ", "A complete log of this run")
HINT = "set node_modules to an install of your own to skip the prepared one"


def _lines(text: str) -> list[str]:
    return [m.group("text") for m in _LINE.finditer(text)]


def _first(lines: list[str], *skip: str) -> str:
    """The first line of npm's account that says something (not a code, errno or blank)."""
    for line in lines:
        if not line.startswith((*_NOISE, *skip)) and line.strip("- "):
            return line
    return lines[0] if lines else "no output"


def npm_rules(text: str, network: bool) -> tuple[Cause, str] | None:
    """The cause of a failed ``npm ci`` and what to do, or None."""
    found = _CODE.search(text)
    code = found.group("code") if found else None
    lines = _lines(text)
    if code == "EUSAGE" and (sync := _SYNC.search(text)):
        detail = next((ln for ln in lines if ln.startswith(("Invalid:", "Missing:"))), None)
        return "lock_unresolvable", one(
            f"{detail or sync.group(0)}: package.json and its lock are out of sync, "
            "run `npm install` and commit the lock"
        )
    if code == "E404" and (m := _NOT_FOUND.search(text)):
        return "unknown_package", f"package {m.group('spec')} not found in the registry"
    if code == "ETARGET" and (m := _NO_VERSION.search(text)):
        return "unknown_package", f"no version {m.group('spec')} in the registry"
    if code == "ENOTCACHED":
        where = "the network was not allowed" if not network else "npm ran offline"
        return "no_registry_access", one(f"no registry access ({where}): {_first(lines)}")
    if code in ("EBADENGINE", "EBADPLATFORM"):
        who, need, has = _WHO.search(text), _NEEDS.search(text), _HAS.search(text)
        if need is None:
            return "toolchain_mismatch", one(f"{code}: {_first(lines).removeprefix('notsup ')}")
        what = who.group("pkg") if who else "a package"
        machine = f", this machine has {has.group('has')}" if has else ""
        return "toolchain_mismatch", one(f"{code}: {what} requires {need.group('need')}{machine}")
    if code in ("E401", "E403", "ENEEDAUTH"):
        return "no_registry_access", one(
            f"the registry refused the install ({code}): {_first(lines, '401', '403')}; a "
            f"registry that needs credentials cannot be used by the install step ({HINT})"
        )
    if code in _NETWORK:
        return "no_registry_access", one(f"no registry access ({code}): {_first(lines)}")
    if code == "EINTEGRITY":
        return "lock_unresolvable", one(f"{_first(lines)}: the lock's integrity does not match")
    if code is not None:
        return "build_failed", one(f"npm ci failed ({code}): {_first(lines)}")
    return no_registry(text)
