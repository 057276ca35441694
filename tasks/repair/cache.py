"""Content-keyed store of the repair roles' replies: a re-run on the same failures asks no model.

The key is the sha256 of the role, the model name, the prompt (name, version, hash) and the exact
messages sent, which hold the failures, the code, the git changes, the feedback and any previous
patch. So the same question on the same code gets the same answer from disk, and anything that
changes the question asks the model again. Entries are JSON files
``<home>/cache/repair/replies/<key>.json`` written atomically; a damaged entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel

from tasks.core.json_store import JsonStore
from tasks.core.types import PromptMeta

KEY_VERSION = "repair-reply-v1"


def reply_key(role: str, model: str, prompt: PromptMeta, messages: list[dict[str, str]]) -> str:
    """The sha256 of everything a reply depends on."""
    payload = [KEY_VERSION, role, model, prompt.model_dump(), messages]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class _Reply(BaseModel):
    reply: str


class ReplyCache:
    """A directory of cached replies (text), one JSON file per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._store = JsonStore(directory, _Reply)

    @classmethod
    def under(cls, cache_root: Path) -> ReplyCache:
        """The cache in `cache_root` (Settings.cache_root: default AUTOPILOT_HOME/cache)."""
        return cls(cache_root / "repair" / "replies")

    def get(self, key: str) -> str | None:
        """The stored reply text, or None."""
        entry = self._store.get(key)
        return None if entry is None else entry.reply

    def put(self, key: str, reply: str) -> None:
        """Store `reply` atomically; a failure to write is logged, never raised."""
        self._store.put(key, _Reply(reply=reply))
