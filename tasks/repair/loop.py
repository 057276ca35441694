"""One group's repair loop: diagnose -> surgeon -> audit -> route, until done or a person.

A plain function over :class:`~tasks.repair.state.GroupState`; the flow runs it as one Prefect task
per group. ``save`` is called after every step with the step's name, so the state can be archived
(and a run resumed or studied) at any point. Without a model a group is reproduced and ends
``needs_model`` at the step a model would take (``--resume`` with a model goes on from there).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tasks.core.config import Settings
from tasks.core.errors import ConfigError
from tasks.core.types import TestCaseResult
from tasks.model.client import ModelClient
from tasks.repair.cache import ReplyCache
from tasks.repair.knowledge import Knowledge, example_text
from tasks.repair.memory import earlier_text
from tasks.repair.reproduce import reproduce
from tasks.repair.review import review_patch
from tasks.repair.roles import build_context, diagnose, extend_context, surgeon
from tasks.repair.routing import route_after_audit, route_after_diagnosis
from tasks.repair.state import (
    Attempt,
    GroupState,
    PatchReview,
)
from tasks.toolchains.base import Toolchain

log = logging.getLogger(__name__)

SaveFn = Callable[[GroupState, str], None]


@dataclass
class RepairEnv:
    """What every group's loop shares: where the code is, the model, the settings."""

    #: None when no model is configured: groups are reproduced, then end ``needs_model``.
    client: ModelClient | None
    settings: Settings
    repo_root: Path
    sub: str
    base_commit: str
    #: The project's toolchain, as the settings configure it (chosen once for the run).
    chain: Toolchain
    #: The project inside a read-only worktree at the base commit (context is read from here).
    project: Path
    all_failures: list[TestCaseResult] = field(default_factory=list)
    #: Past accepted fixes and rejected patches (tasks/repair/knowledge.py).
    knowledge: Knowledge = field(default_factory=Knowledge)

    @property
    def model(self) -> ModelClient:
        """The model client (ConfigError without one: the loop never asks then)."""
        if self.client is None:
            raise ConfigError(NO_MODEL)
        return self.client

    @property
    def reply_cache(self) -> ReplyCache:
        """Replies of earlier identical questions (see tasks/repair/cache.py)."""
        return ReplyCache.under(self.settings.cache_root)


def now() -> dt.datetime:
    """The current UTC time (state timestamps)."""
    return dt.datetime.now(dt.UTC)


def _step(state: GroupState, env: RepairEnv, save: SaveFn) -> None:
    if state.step == "diagnose":
        state.diagnoses.append(diagnose(env.model, state, env.reply_cache))
        state.feedback = ""
        extend_context(env.project, state)
        state.step = route_after_diagnosis(state, env.settings.repair)
        save(state, "diagnose")
    elif state.step == "surgeon":
        patch = surgeon(env.model, state, env.reply_cache)
        number = len(state.attempts) + 1
        state.attempts.append(
            Attempt(number=number, diagnosis_index=len(state.diagnoses) - 1, patch=patch)
        )
        state.step = "audit"
        save(state, "surgeon")
        if env.knowledge.is_rejected(state.group, patch):
            # Never offered again: revised like a patch that failed its audit.
            state.attempts[-1].audit = PatchReview(
                verdict="NEEDS_REVISION", feedback=REJECTED, rejected_before=True
            )
            state.reasons.append(f"attempt {number}: NEEDS_REVISION: {REJECTED}")
            state.step = route_after_audit(state, env.settings.repair)
            save(state, "audit")
    elif state.step == "audit":
        attempt = state.attempts[-1]
        others = [c for c in env.all_failures if c not in state.group.tests]
        attempt.audit = review_patch(
            repo_root=env.repo_root,
            sub=env.sub,
            base_commit=env.base_commit,
            chain=env.chain,
            patch=attempt.patch,
            group=state.group,
            diagnosis=state.diagnosis,
            known_failures=others,
            settings=env.settings,
        )
        state.reasons.append(
            f"attempt {attempt.number}: {attempt.audit.verdict}"
            + (f": {attempt.audit.feedback}" if attempt.audit.feedback else "")
        )
        state.step = route_after_audit(state, env.settings.repair)
        save(state, "audit")


TOOL_FAILED = "a tool failed"
NO_MODEL = "no model configured: set MISTRAL_API_KEY or AUTOPILOT_MODEL_URL"
#: The reason of a group that ends ``needs_model`` (a resumed run drops it).
NEEDS_MODEL = (
    f"{NO_MODEL}; reproduced and grouped, not diagnosed: configure a model and run "
    "`autopilot repair --resume <run_id>` to go on"
)
#: The feedback for a patch a person rejected before for the same signature.
REJECTED = (
    "a person rejected this exact patch for this failure before; it is not offered again: "
    "propose a different fix"
)


def run_group(state: GroupState, env: RepairEnv, save: SaveFn) -> GroupState:
    """Advance `state` until it is done (a PASSED patch) or needs a person.

    Never raises for a failing tool: a model, sandbox or git failure (or any unexpected error)
    hands the group to a person with the reason, so one group never sinks the others.
    """
    state.started_at = state.started_at or now()
    try:
        if state.context is None:
            reproduce(state, env)
            if state.step == "human":  # flaky: reported and handed over, never patched
                save(state, "context")
                return state
            if env.client is None:
                state.outcome = "needs_model"
                state.reasons.append(NEEDS_MODEL)
                save(state, "reproduced")
                return state
            state.context = build_context(env.project, state.group, env.chain)
            state.context.examples = example_text(env.knowledge.examples(state.group))
            state.context.history = earlier_text(
                env.knowledge.earlier.get(state.group.signature, [])
            )
            save(state, "context")
        while state.step not in ("done", "human"):
            _step(state, env, save)
    except Exception as exc:  # the boundary of one group: report it, never crash the run
        log.warning("group %s: tool failed: %s: %s", state.group.id, type(exc).__name__, exc)
        state.handoff_reasons.append(f"{TOOL_FAILED}: {type(exc).__name__}: {exc}")
        state.failed_step = state.step  # where a resumed run picks the group up again
        state.step = "human"
        save(state, "tool-failed")
    if state.step == "done" and state.attempts:
        state.final_patch = state.attempts[-1].patch
    return state
