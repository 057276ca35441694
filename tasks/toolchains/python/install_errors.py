"""Why a virtualenv install (uv or pip) failed, in one line (the Python rules of
:mod:`tasks.envs.classify`)."""

from __future__ import annotations

import re

from tasks.envs.classify import NETWORK, header, native_hint, no_registry, one
from tasks.envs.types import Cause

_LOCK = re.compile(
    r"Failed to parse `uv.lock`|The lockfile at `uv.lock` needs|lockfile .* needs to be updated",
    re.IGNORECASE,
)
_PY_VERSION = re.compile(
    r"(?:requires-python|Python requirement|incompatible with the project's Python).*", re.I
)
_PY_UNKNOWN = re.compile(
    r"Because (?P<pkg>[\w.-]+) was not found in the (?:package registry|cache|provided package "
    r"locations)|No matching distribution found for (?P<pip>[\w.-]+)|"
    r"(?P<ver>[\w.-]+)==[\w.]+ .*(?:no version|not found)",
    re.IGNORECASE,
)
_PY_BUILD = re.compile(r"Failed to build `?(?P<pkg>[\w.-]+)|Failed building wheel for (?P<w>\S+)")


def installer_rules(text: str, network: bool) -> tuple[Cause, str] | None:
    """The cause of a failed uv or pip step and what to do, or None."""
    if lock := _LOCK.search(text):
        return "lock_unresolvable", f"{one(lock.group(0))}: run `uv lock`"
    if m := _PY_VERSION.search(text):
        return "toolchain_mismatch", one(m.group(0))
    lacks = header(text)
    build = _PY_BUILD.search(text)
    if lacks or (build and "error: command" in text):
        pkg = (build.group("pkg") or build.group("w")) if build else None
        need = f"header {lacks}" if lacks else "a compiler or native library"
        return "missing_native_library", f"package {pkg or '?'} needs {need}{native_hint(pkg)}"
    if m := _PY_UNKNOWN.search(text):
        pkg = m.group("pkg") or m.group("pip") or m.group("ver")
        if m.group("pip") and NETWORK.search(text):
            return no_registry(text)
        where = "in the package index" if network else "offline (the network was not allowed)"
        return "unknown_package", f"package {pkg} not found {where}"
    return no_registry(text)
