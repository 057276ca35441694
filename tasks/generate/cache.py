"""Content-keyed store of finished per-file outcomes: a re-run on unchanged files asks no model.

Why our own store rather than Prefect's result cache: the key must be computed from content the
task reads itself (the prompt context, the skill, the prompt and rubric hashes, the model names
and the gate settings), the entries must survive a new ``PREFECT_HOME`` and a killed run, and a
test must be able to see them. Entries are JSON files ``<home>/cache/nightly/<key>.json``
written atomically, one per finished file, so a run killed half-way and started again re-uses
every file that finished. Only decisions are stored (accepted, rejected): an error may be the
model's or the sandbox's passing trouble and is tried again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from judge.rubric import load_rubric
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.json_store import JsonStore
from tasks.generate.context import PromptContext
from tasks.generate.skills import Skill, choose_skill
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.model.prompts import load_prompt

#: v3: the support gate (support files left out, or proved against the canary and the
#: existing tests), and the result-hook and hidden-tests rules.
KEY_VERSION = "nightly-outcome-v3"
CACHED_VERDICTS = ("accepted", "rejected")


def outcome_key(
    *,
    target: Target,
    context: PromptContext,
    skill: Skill,
    toolchain: str,
    toolchain_config: str,
    settings: Settings,
    max_iterations: int,
) -> str:
    """The sha256 of everything a file's outcome depends on.

    Source, existing specs, factories, helpers and versions (the context), the skill's text, the
    generate/fix/judge prompts (name, version, hash of file and partials), the rubric, the model
    names, the gates, the judge samples and the iteration budget, and the toolchain with what
    decides its validations (`toolchain_config`: the project's tool configuration and the
    toolchain's own resources, see :meth:`Toolchain.config_digest`).
    """
    prompts = [load_prompt(name).meta.model_dump() for name in ("generate", "fix", "judge")]
    payload = {
        "v": KEY_VERSION,
        "target": target.model_dump(mode="json"),
        "context": context.digest(),
        "skill": [skill.name, skill.version, skill.sha256],
        "prompts": prompts,
        "rubric": load_rubric().sha256,
        "models": [settings.models.generator, settings.models.judge],
        "gates": settings.gates.model_dump(mode="json"),
        "judge_samples": settings.model.judge_samples,
        "toolchain": [toolchain, toolchain_config],
        "max_iterations": max_iterations,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def default_store_dir(settings: Settings) -> Path:
    """``<cache root>/nightly`` (default ``<AUTOPILOT_HOME>/cache/nightly``)."""
    return settings.cache_root / "nightly"


class OutcomeStore:
    """A directory of finished outcomes, one JSON file per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._store = JsonStore(directory, FileOutcome)

    def get(self, key: str) -> FileOutcome | None:
        """The stored outcome, marked cached and costing nothing this run; None on a miss
        (a damaged entry too: the file is simply generated again)."""
        outcome = self._store.get(key)
        if outcome is None:
            return None
        return outcome.model_copy(update={"cached": True, "tokens": 0, "model_calls": 0})

    def put(self, key: str, outcome: FileOutcome) -> bool:
        """Store a decided outcome atomically; errors and skips are not stored.

        Returns:
            True when stored. A failure to write is logged, never raised.
        """
        if outcome.verdict not in CACHED_VERDICTS:
            return False
        return self._store.put(key, outcome.model_copy(update={"cached": False}))


def skip_key(project: Path, target: Target) -> str | None:
    """What the run history compares before it skips a file rejected before: the sha256 of the
    source's bytes, the skill chosen for it and the generate/fix/judge prompts (None: the source
    cannot be read or no skill fits; such a file is never skipped)."""
    try:
        source = (project / target.source).read_bytes()
        skill = choose_skill(target.source, target.kind)
    except (OSError, AutopilotError):
        return None
    prompts = [load_prompt(name).meta.model_dump() for name in ("generate", "fix", "judge")]
    payload = {
        "v": "skip-key-v1",
        "source": hashlib.sha256(source).hexdigest(),
        "skill": [skill.name, skill.version, skill.sha256],
        "prompts": prompts,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
