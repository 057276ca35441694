"""Which host paths may be shown to a sandbox: the one rule, used by the settings (declared
``[sandbox] read_only`` paths are checked when loaded) and by the sandbox's view (every bind is
checked again).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Directories under the home that hold credentials: never shown, whatever is declared.
SECRET_HOME_DIRS = (".ssh", ".aws", ".config")


def _home() -> str | None:
    try:
        return os.path.realpath(Path.home())
    except (RuntimeError, KeyError):
        return None


def _autopilot_home() -> str:
    env = os.environ.get("AUTOPILOT_HOME")
    return os.path.realpath(env) if env else os.path.realpath(Path.home() / ".autopilot")


def within(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or lies below it (both normalised, absolute)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def forbidden_reason(
    path: str,
    *,
    home: str | None = None,
    autopilot_home: str | None = None,
    allow_envs: bool = False,
) -> str | None:
    """Why `path` may never be shown to a sandbox, or None when it may.

    Never: a relative path, ``/``, ``/proc``, ``/tmp``, the home directory or one of its parents,
    anything under ``~/.ssh``, ``~/.aws`` or ``~/.config``, and ``$AUTOPILOT_HOME`` (or a parent
    of it) and what it holds. With `allow_envs`, Autopilot's own prepared environments
    ``$AUTOPILOT_HOME/envs/<name>`` are allowed, one directory per environment. Both the path as
    written and the path its links lead to are checked.

    Args:
        path: the directory or file to show.
        home: the home directory (default: the current user's).
        autopilot_home: Autopilot's state directory (default: $AUTOPILOT_HOME or ~/.autopilot).
        allow_envs: whether ``$AUTOPILOT_HOME/envs/<name>`` may be shown (toolchains only).
    """
    if not os.path.isabs(path):
        return f"{path}: not an absolute path"
    home = os.path.realpath(home) if home else _home()
    state = os.path.realpath(autopilot_home) if autopilot_home else _autopilot_home()
    for candidate in dict.fromkeys((os.path.normpath(path), os.path.realpath(path))):
        reason = _forbidden(candidate, home, state, allow_envs)
        if reason:
            return f"{path}: {reason}"
    return None


def _forbidden(path: str, home: str | None, state: str, allow_envs: bool) -> str | None:
    if path == "/":
        return "the whole file system"
    if within(path, "/proc"):
        return "the host's processes"
    if path == "/tmp":
        return "every process's temporary files"
    if home and home != "/":
        if path == home:
            return "the home directory"
        if within(home, path):
            return "a parent of the home directory"
        for secret in SECRET_HOME_DIRS:
            if within(path, os.path.join(home, secret)):
                return f"under ~/{secret}, which holds credentials"
    if within(state, path):
        return "holds Autopilot's own state ($AUTOPILOT_HOME)"
    if within(path, state):
        envs = os.path.join(state, "envs")
        rel = os.path.relpath(path, envs) if within(path, envs) else ""
        if allow_envs and rel and rel != "." and not rel.startswith(".."):
            return None
        return "under $AUTOPILOT_HOME, Autopilot's own state"
    return None
