"""Content-keyed store of the repair roles' replies: a re-run on the same failures asks no model.

The key is the sha256 of the role, the model name, the prompt (name, version, hash) and the exact
messages sent, which hold the failures, the code, the git changes, the feedback and any previous
patch. So the same question on the same code gets the same answer from disk, and anything that
changes the question asks the model again. Entries are JSON files
``<home>/cache/repair/replies/<key>.json`` written atomically; a damaged entry is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from tasks.types import PromptMeta

log = logging.getLogger(__name__)

KEY_VERSION = "repair-reply-v1"


def reply_key(role: str, model: str, prompt: PromptMeta, messages: list[dict[str, str]]) -> str:
    """The sha256 of everything a reply depends on."""
    payload = [KEY_VERSION, role, model, prompt.model_dump(), messages]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ReplyCache:
    """A directory of cached replies (text), one JSON file per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def under(cls, home: Path) -> ReplyCache:
        """The cache in `home` (AUTOPILOT_HOME)."""
        return cls(home / "cache" / "repair" / "replies")

    def get(self, key: str) -> str | None:
        """The stored reply text, or None."""
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        text = data.get("reply") if isinstance(data, dict) else None
        return text if isinstance(text, str) else None

    def put(self, key: str, reply: str) -> None:
        """Store `reply` atomically; a failure to write is logged, never raised."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"reply": reply}, fh)
                os.replace(tmp, self.directory / f"{key}.json")
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("%s: could not store a reply: %s", self.directory, exc)
