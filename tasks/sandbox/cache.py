"""Level 1 of the two-level cache: an identical (commit, patch, command) reuses its result.

Results are JSON files `<dir>/<key>.json`, written atomically (temporary file + rename), so a
crash or a concurrent writer never leaves a half-written entry behind.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from tasks.core.json_store import JsonStore
from tasks.core.types import CommandResult

_KEY_VERSION = "sandbox-cache-v1"


def cache_key(commit: str, patch_hash: str, argv: Sequence[str], extra: str = "") -> str:
    """A stable key for one command run on one repository state.

    Args:
        commit: the commit the worktree was created at.
        patch_hash: a hash of the patch applied on top ("" for none).
        argv: the command.
        extra: anything else the result depends on (toolchain version, env, ...).
    """
    payload = json.dumps([_KEY_VERSION, commit, patch_hash, list(argv), extra])
    return hashlib.sha256(payload.encode()).hexdigest()


def default_cache_dir(home: Path | None = None) -> Path:
    """`<home>/cache/sandbox`; home defaults to $AUTOPILOT_HOME, else ~/.autopilot."""
    if home is None:
        env_home = os.environ.get("AUTOPILOT_HOME")
        home = Path(env_home) if env_home else Path.home() / ".autopilot"
    return home / "cache" / "sandbox"


class ResultCache:
    """A directory of cached CommandResults, one JSON file per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._store = JsonStore(directory, CommandResult)

    def get(self, key: str) -> CommandResult | None:
        """The stored result marked cached=True, or None (missing or unreadable entry)."""
        result = self._store.get(key)
        return None if result is None else result.model_copy(update={"cached": True})

    def put(self, key: str, result: CommandResult) -> None:
        """Store `result` under `key` atomically; a failure to write is logged, not raised."""
        self._store.put(key, result.model_copy(update={"cached": False}))
