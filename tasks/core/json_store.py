"""A directory of pydantic models, one JSON file per content key: the project's disk caches.

Writes are atomic (a temporary file renamed into place), so a crash or a concurrent writer never
leaves half an entry; a damaged or unreadable entry is a miss, logged, never an error; a failure
to write is logged and the work simply is not cached. Keys are hex digests, so an entry's file
name can never step outside the directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
_HEX = frozenset("0123456789abcdef")


class JsonStore(Generic[M]):
    """Entries of type `model` under `directory`, at ``<directory>/<key>.json``."""

    def __init__(self, directory: Path, model: type[M]) -> None:
        self.directory = directory
        self.model = model

    def path(self, key: str) -> Path:
        """The entry's file. Raises ValueError for a key that is not a hex digest."""
        if not key or not set(key) <= _HEX:
            raise ValueError(f"invalid cache key {key!r}: expected a hex digest")
        return self.directory / f"{key}.json"

    def get(self, key: str) -> M | None:
        """The stored entry, or None (missing, unreadable or damaged)."""
        path = self.path(key)
        try:
            data = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("%s: cache entry unreadable: %s", path, exc)
            return None
        try:
            return self.model.model_validate_json(data)
        except ValidationError as exc:
            log.warning("%s: cache entry ignored: %s", path, exc.errors()[0]["msg"])
            return None

    def put(self, key: str, value: M) -> bool:
        """Store `value` atomically. Returns False (logged) when it could not be written."""
        path = self.path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(value.model_dump_json())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("%s: could not store cache entry: %s", path, exc)
            return False
        return True
