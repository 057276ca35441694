"""Level 1 of the two-level cache: an identical (commit, patch, command) reuses its result.

Results are JSON files `<dir>/<key>.json`, written atomically (temporary file + rename), so a
crash or a concurrent writer never leaves a half-written entry behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from tasks.types import CommandResult

logger = logging.getLogger(__name__)

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

    def _path(self, key: str) -> Path:
        if not key or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"invalid cache key {key!r}: expected a hex digest")
        return self.directory / f"{key}.json"

    def get(self, key: str) -> CommandResult | None:
        """The stored result marked cached=True, or None (missing or unreadable entry)."""
        path = self._path(key)
        try:
            data = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("%s: cache entry unreadable: %s", path, exc)
            return None
        try:
            result = CommandResult.model_validate_json(data)
        except ValidationError as exc:
            # A damaged entry is a miss, not a failure: the command simply runs again.
            logger.warning("%s: cache entry ignored: %s", path, exc.errors()[0]["msg"])
            return None
        return result.model_copy(update={"cached": True})

    def put(self, key: str, result: CommandResult) -> None:
        """Store `result` under `key` atomically; a failure to write is logged, not raised."""
        path = self._path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(result.model_copy(update={"cached": False}).model_dump_json())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            logger.warning("%s: could not store cache entry: %s", path, exc)
