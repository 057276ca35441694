"""A file job's finished steps, kept as they finish: a resumed job replays them instead of
running them again, and goes on at its first unfinished step.

The nightly keeps a file's outcome only once the file is done (:mod:`tasks.generate.cache`),
and every model reply as it arrives (:mod:`tasks.model.reply_store`). Between the two lies the
sandbox work: each round's lint, run with coverage and re-runs. Those are kept here, under the
file's outcome key (what the outcome depends on) and the step's own inputs (the files it ran
with), in ``<cache root>/nightly-steps/<outcome key>/<step digest>.json``. A job killed after
its third round, started again on the same files, replays the three rounds from here and the
model's replies from the reply store, and pays only for what it had not done. A finished file's
steps are removed once its outcome is kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from tasks.core.json_store import JsonStore
from tasks.core.types import LintOffense, ValidationResult

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
KEY_VERSION = "nightly-step-v1"


class MeasuredRound(BaseModel):
    """A round's measurements: the files as the linter left them, its offences, its run with
    coverage and the re-runs made in the same process."""

    files: dict[str, str]
    offences: list[LintOffense] = Field(default_factory=list)
    validation: ValidationResult
    reruns: list[ValidationResult] | None = None


class Reruns(BaseModel):
    """The flakiness re-runs made after the rounds."""

    runs: list[ValidationResult]


class StepMemo:
    """One file job's kept steps (a memo without a directory keeps nothing)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    @classmethod
    def under(cls, store_dir: Path, outcome_key: str) -> StepMemo:
        """The steps of the job whose outcome key is `outcome_key`, beside the outcome store
        `store_dir` (``<cache root>/nightly`` -> ``<cache root>/nightly-steps``)."""
        return cls(store_dir.with_name(f"{store_dir.name}-steps") / outcome_key)

    @staticmethod
    def _digest(step: str, inputs: object) -> str:
        payload = json.dumps([KEY_VERSION, step, inputs], sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    def recall(self, step: str, inputs: object, model: type[M]) -> M | None:
        """What `step` gave on these `inputs` before, or None."""
        if self.directory is None:
            return None
        kept = JsonStore(self.directory, model).get(self._digest(step, inputs))
        if kept is not None:
            log.info("%s: replayed from the file job's kept steps", step)
        return kept

    def keep(self, step: str, inputs: object, value: BaseModel) -> None:
        """Keep what `step` gave on `inputs` (atomically; a failure to write only loses it)."""
        if self.directory is not None:
            JsonStore(self.directory, type(value)).put(self._digest(step, inputs), value)

    def clear(self) -> None:
        """Forget the job's steps (its outcome is kept: nothing is left to resume)."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
