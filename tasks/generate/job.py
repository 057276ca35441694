"""One target's whole job: skill, context, cache look-up, a private copy, the loop, the store.

Each target works in its own copy of the project (:mod:`tasks.generate.copies`): a draft that
does not load, or a new factory, must never break another target's runs that happen at the same
time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.types import ToolchainName
from tasks.generate.cache import OutcomeStore, outcome_key
from tasks.generate.context import build_context
from tasks.generate.copies import copy_project, lease_copy
from tasks.generate.loop import DEFAULT_MAX_ITERATIONS, generate_for_file
from tasks.generate.report import NO_MODEL
from tasks.generate.skills import choose_skill
from tasks.generate.steps import StepMemo
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.model.client import ModelClient
from tasks.sandbox.make import make_runner
from tasks.scale import ShippedRun
from tasks.toolchains.registry import toolchain_for

log = logging.getLogger(__name__)

__all__ = ["NO_MODEL", "FileJob", "copy_project", "failed", "run_file_job", "skipped"]


class FileJob(BaseModel):
    """What one per-file task needs (plain data, so any task runner can ship it)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    project: Path = Field(description="The base worktree's project directory (read only)")
    target: Target
    toolchain: ToolchainName
    settings: Settings
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    store_dir: Path
    client_token: str = Field("", description="Names the run's shared model client")
    max_model_calls: int | None = Field(None, description="The run's model-call budget")
    file_time_limit_s: float | None = Field(None, description="Wall-clock budget per file")
    run: ShippedRun | None = Field(
        None, description="The run as any worker makes it ready (None: this process's own)"
    )


def skipped(target: Target, reason: str) -> FileOutcome:
    """The outcome of a target the run did not work on."""
    return FileOutcome(
        source=target.source,
        kind=target.kind,
        spec=target.spec,
        verdict="skipped",
        reasons=[reason],
        coverage_before=target.coverage_before,
        changed_lines=list(target.changed_lines),
        diff_coverage_before=target.diff_coverage_before,
    )


def failed(target: Target, reason: str) -> FileOutcome:
    """The outcome of a target that could not be worked on."""
    return skipped(target, reason).model_copy(update={"verdict": "error"})


def run_file_job(job: FileJob, client_for: Callable[[], ModelClient]) -> FileOutcome:
    """Generate (or re-use) the outcome of one target.

    Args:
        job: the target and everything about the run it needs.
        client_for: returns the model client; only called on a cache miss.

    Returns:
        The outcome; every failure is an ``error`` outcome naming the file and the reason.
    """
    target = job.target
    try:
        # The one choice of skill, toolchain and context for this target.
        skill = choose_skill(target.source, target.kind)
        chain = toolchain_for(job.settings, job.toolchain)
        context = build_context(job.project, target, chain)
        key = outcome_key(
            target=target,
            context=context,
            skill=skill,
            toolchain=job.toolchain,
            toolchain_config=chain.config_digest(job.project),
            settings=job.settings,
            max_iterations=job.max_iterations,
        )
    except AutopilotError as exc:
        return failed(target, str(exc))
    store = OutcomeStore(job.store_dir)
    steps = StepMemo.under(job.store_dir, key)
    hit = store.get(key)
    if hit is not None:
        log.info("%s: unchanged since a finished run; outcome re-used", target.source)
        return hit
    try:
        client = client_for()
    except AutopilotError as exc:
        return failed(target, f"{target.source}: {exc}")
    if job.max_model_calls is not None and client.calls >= job.max_model_calls:
        return skipped(target, f"model call budget of {job.max_model_calls} calls exhausted")
    with ExitStack() as stack:
        try:
            copy = stack.enter_context(lease_copy(job.project))
            runner = make_runner(
                job.settings.sandbox, root=copy, toolchain_dirs=chain.sandbox_dirs(copy)
            )
        except (AutopilotError, OSError) as exc:
            return failed(target, f"{target.source}: cannot prepare a sandbox copy: {exc}")
        outcome = generate_for_file(
            copy,
            target,
            chain=chain,
            runner=runner,
            client=client,
            settings=job.settings,
            skill=skill,
            context=context,
            max_iterations=job.max_iterations,
            max_model_calls=job.max_model_calls,
            time_limit_s=job.file_time_limit_s,
            steps=steps,
        )
    if store.put(key, outcome):
        steps.clear()  # the outcome is kept: nothing of this job is left to resume
    return outcome
