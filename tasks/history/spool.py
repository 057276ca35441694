"""Runs the store could not take, kept on disk until a later run writes them.

A run whose history write fails (the store is locked, unreachable, corrupted) keeps its batch
as ``<home>/history-spool/<run id>.json`` (written to a temporary file, then renamed: never
half a file); the next run that opens the store writes every spooled batch, each in its own
transaction, and removes it. A batch that no longer reads (a damaged file) is renamed
``.bad`` with a warning, never retried forever.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from tasks.history.db import HistoryUnavailable
from tasks.history.records import RunBatch
from tasks.history.store import HistoryStore

log = logging.getLogger(__name__)


def spool_dir(home: Path) -> Path:
    """Where unwritten runs wait."""
    return home / "history-spool"


def spool(home: Path, batch: RunBatch) -> Path | None:
    """Keep `batch` for a later run (None: it could not be kept either; logged)."""
    folder = spool_dir(home)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".batch-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(batch.model_dump_json())
            fh.flush()
            os.fsync(fh.fileno())
        path = folder / f"{batch.run.run_id}.json"
        os.replace(tmp, path)
    except OSError as exc:
        log.error("history: run %s not kept: %s", batch.run.run_id, exc)
        return None
    return path


def replay(home: Path, store: HistoryStore) -> int:
    """Write every spooled batch into `store` (oldest first); returns how many were written.

    Raises:
        HistoryUnavailable: the store failed while writing (the batch stays spooled).
    """
    folder = spool_dir(home)
    if not folder.is_dir():
        return 0
    written = 0
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            batch = RunBatch.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            log.warning(
                "history: spooled %s unreadable, set aside: %s", path.name, str(exc).splitlines()[0]
            )
            path.rename(path.with_suffix(".bad"))
            continue
        store.write(batch)
        path.unlink(missing_ok=True)
        written += 1
    if written:
        log.info("history: %d spooled run(s) written to %s", written, store.where)
    return written


__all__ = ["HistoryUnavailable", "replay", "spool", "spool_dir"]
