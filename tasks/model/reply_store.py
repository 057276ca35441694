"""Every model reply a run receives, kept before it is used: a resumed or repeated run asks
again only for what it never received.

The key is the sha256 of the exact request (model, the messages as sent, temperature, token
limit, response format) and its *occurrence*: the first, second, ... time this client sends
that same request. So a judge's three identical samples are three entries, and a run that is
started again replays them in the same order; a re-ask carries the rejected reply and the
parse error, so it is a request of its own. An entry is written (atomically) the moment the
reply arrives, before it is parsed or used: a run killed right after is never charged for it
again. Entries live under ``<cache root>/replies/<key[:2]>/<key>.json``; a damaged one is a
miss. ``AUTOPILOT_MODEL__REUSE_REPLIES=false`` turns the store off (every request is sent).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tasks.core.json_store import JsonStore

KEY_VERSION = "model-reply-v1"


class StoredReply(BaseModel):
    """One reply as it came back, with what it cost when it was bought."""

    text: str
    model: str
    role: str
    about: str
    input_tokens: int = 0
    output_tokens: int = 0
    created_at: str = Field("", description="When the reply arrived (ISO 8601, UTC)")


def request_digest(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    temperature: float,
    max_tokens: int,
    response_format: Mapping[str, Any] | None,
) -> str:
    """The sha256 of everything a reply depends on (not yet its occurrence)."""
    payload = [KEY_VERSION, model, list(messages), temperature, max_tokens, response_format]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class ReplyStore:
    """The replies on disk, and this process's count of each request's occurrences."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()

    @classmethod
    def under(cls, cache_root: Path) -> ReplyStore:
        """The store in `cache_root` (``Settings.cache_root``: default AUTOPILOT_HOME/cache)."""
        return cls(cache_root / "replies")

    def next_key(self, digest: str) -> str:
        """The key of this occurrence of the request `digest` (each call counts one)."""
        with self._lock:
            occurrence = self._seen[digest]
            self._seen[digest] += 1
        return hashlib.sha256(f"{digest}:{occurrence}".encode()).hexdigest()

    def _store(self, key: str) -> JsonStore[StoredReply]:
        return JsonStore(self.directory / key[:2], StoredReply)

    def get(self, key: str) -> StoredReply | None:
        """The reply kept under `key`, or None."""
        return self._store(key).get(key)

    def put(self, key: str, reply: StoredReply) -> bool:
        """Keep `reply` under `key` (atomically); False (logged) when it could not be written."""
        return self._store(key).put(key, reply)
