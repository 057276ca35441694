"""Which host paths may be shown to a sandbox: the one rule, used by the settings (declared
``[sandbox] read_only`` paths are checked when loaded), by the sandbox's view (every bind is
checked again) and by the docker backend (every volume).

Two levels: :func:`forbidden_reason` judges a path by where it is (no directory is read), for
every bind, Autopilot's own toolchains included; :func:`declared_reason` adds what a declared
path holds (a Unix socket at any depth up to :data:`SCAN_MAX_ENTRIES` entries, credentials
under a home directory), for the paths an operator declares.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tasks.core.secrets import is_secret_path

#: Entries of a home directory that hold credentials (by name): never shown, nor what they
#: hold, nor a directory that holds them, whatever is declared.
CREDENTIAL_HOME_ENTRIES = (
    ".ssh",
    ".aws",
    ".config",
    ".docker",
    ".kube",
    ".gnupg",
    ".azure",
    ".gcloud",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".dockercfg",
    ".vault-token",
    ".password-store",
    ".terraform.d",
    ".boto",
    ".s3cfg",
    ".mc",
    ".oci",
    ".prefect",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".local/share/keyrings",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
)
#: The system's own secrets: never shown, nor any directory that holds them (``/etc``, ``/``).
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/pki/CA/private",
    "/etc/security/opasswd",
    "/var/lib/docker",
)
#: Trees of the host's kernel, devices and sockets: never shown, nor a directory holding them.
HOST_TREES = (
    ("/proc", "the host's processes"),
    ("/sys", "the host's kernel state"),
    ("/dev", "the host's devices"),
    ("/run", "the host's sockets (/run)"),
    ("/var/run", "the host's sockets (/var/run)"),
)
#: How much of a declared directory is searched for sockets and credentials.
SCAN_MAX_ENTRIES = 10_000
SCAN_MAX_DEPTH = 16


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
    """Why `path` may never be shown to a sandbox, or None when it may (judged by where it is).

    Never: a relative path, ``/``, ``/tmp``, ``/proc``, ``/sys``, ``/dev``, ``/run`` and
    ``/var/run`` (or what they hold), a Unix socket; a home directory (the user's, ``/root``,
    ``/home/<user>``) or one of its parents, and under one what holds credentials by name
    (:data:`CREDENTIAL_HOME_ENTRIES`, or a file :func:`is_secret_path` names); the system's
    secrets (:data:`SYSTEM_SECRETS`) or a directory holding them (``/etc``); and
    ``$AUTOPILOT_HOME`` (or a parent of it) and what it holds. With `allow_envs`, Autopilot's
    own prepared environments ``$AUTOPILOT_HOME/envs/<name>`` are allowed, one directory per
    environment. Both the path as written and the path its links lead to are checked.

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
    if _is_socket(path):
        return f"{path}: a Unix socket"
    return None


def declared_reason(
    path: str, *, home: str | None = None, autopilot_home: str | None = None
) -> str | None:
    """Why a declared (``[sandbox] read_only``) path may not be shown, or None.

    :func:`forbidden_reason`, then a name that :func:`is_secret_path` calls a secret, then what
    the directory holds (links followed to their targets): a Unix socket anywhere in it, or,
    under a home directory, an entry that holds credentials by name. At most
    :data:`SCAN_MAX_ENTRIES` entries, :data:`SCAN_MAX_DEPTH` levels deep, are looked at.
    """
    reason = forbidden_reason(path, home=home, autopilot_home=autopilot_home)
    if reason:
        return reason
    if is_secret_path(os.path.basename(os.path.normpath(path))):
        return f"{path}: a credentials file by its name"
    home = os.path.realpath(home) if home else _home()
    found = _holds(os.path.realpath(path), home)
    return f"{path}: holds {found}" if found else None


def _forbidden(path: str, home: str | None, state: str, allow_envs: bool) -> str | None:
    if path == "/":
        return "the whole file system"
    if path == "/tmp":
        return "every process's temporary files"
    for tree, what in HOST_TREES:
        if within(path, tree):
            return what
        if within(tree, path):
            return f"holds {what}"
    for secret in SYSTEM_SECRETS:
        if within(path, secret):
            return f"the system's secrets ({secret})"
        if within(secret, path):
            return f"holds the system's secrets ({secret})"
    reason = _home_reason(path, home)
    if reason:
        return reason
    if within(state, path):
        return "holds Autopilot's own state ($AUTOPILOT_HOME)"
    if within(path, state):
        envs = os.path.join(state, "envs")
        rel = os.path.relpath(path, envs) if within(path, envs) else ""
        if allow_envs and rel and rel != "." and not rel.startswith(".."):
            return None
        return "under $AUTOPILOT_HOME, Autopilot's own state"
    return None


def _homes(path: str, home: str | None) -> list[str]:
    """The home directories `path` may concern: the user's, root's, and /home/<user>."""
    homes = [h for h in (home, "/root") if h and h != "/"]
    parts = path.split("/")
    if len(parts) > 2 and parts[1] == "home" and parts[2]:
        homes.append(f"/home/{parts[2]}")
    return list(dict.fromkeys(homes))


def _home_reason(path: str, home: str | None) -> str | None:
    for base in _homes(path, home):
        if path == base:
            return "the home directory" if base == home else "a home directory"
        if within(base, path):
            return "a parent of the home directory"
        if within(path, base):
            reason = credential_reason(os.path.relpath(path, base), "~" if base == home else base)
            if reason:
                return reason
    return "every user's home directory" if path == "/home" else None


def credential_reason(rel: str, shown_home: str) -> str | None:
    """Why `rel` (relative to a home directory) holds credentials by its name, or None."""
    for entry in CREDENTIAL_HOME_ENTRIES:
        if within(rel, entry):
            return f"under {shown_home}/{entry}, which holds credentials"
        if within(entry, rel):
            return f"holds {shown_home}/{entry}, which holds credentials"
    if is_secret_path(rel):
        return f"under {shown_home}: {rel} holds credentials by its name"
    return None


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _holds(root: str, home: str | None) -> str | None:
    """A socket or credentials file in the directory `root` (bounded search), or None."""
    if not os.path.isdir(root):
        return None
    homes = [h for h in _homes(root, home) if within(root, h)]
    stack, seen = [(root, 0)], 0
    while stack:
        directory, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > SCAN_MAX_ENTRIES:
                return None
            if _entry_is_socket(entry):
                return f"a Unix socket ({entry.path})"
            for base in homes:
                if credential_reason(os.path.relpath(entry.path, base), base):
                    return f"credentials ({entry.path})"
            if depth < SCAN_MAX_DEPTH and entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, depth + 1))
    return None


def _entry_is_socket(entry: os.DirEntry[str]) -> bool:
    """Whether a directory entry is a socket, or a link to one."""
    if entry.is_symlink():
        return _is_socket(entry.path)
    if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
        return False
    try:
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return False
