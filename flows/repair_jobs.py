"""A repair group as a job any worker can run: what it carries, and what it brings back.

On threads, each group's task shares the flow's model client, toolchain and archive. On Dask
workers in other processes none of those travel: the job carries the group's state, the run
(:class:`tasks.scale.ShippedRun`), the settings without secrets, the knowledge, and where the
run's archive is; the worker makes its toolchain and model client inside the run's context
(:func:`tasks.scale.on_worker`), archives each step's state as the flow would (numbered after
the run state the group started from), and brings back the group's state, the objects it
archived (the flow lists them in its manifest) and its model calls (the flow's records).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from flows.limits import INFRA_RETRIES, INFRA_RETRY_DELAY_S, retry_on_infrastructure
from flows.post_merge_keep import Saver
from tasks.core.config import Settings
from tasks.core.errors import ArchiveError, AutopilotError
from tasks.core.run_context import job_context
from tasks.core.types import TestCaseResult
from tasks.keep.archive import open_archive
from tasks.keep.manifest import ManifestEntry
from tasks.model.client import ModelClient
from tasks.model.messages import CallRecord
from tasks.repair.knowledge import Knowledge
from tasks.repair.loop import TOOL_FAILED, RepairEnv, SaveFn, run_group
from tasks.repair.state import GroupState
from tasks.scale import ShippedRun, on_worker
from tasks.toolchains.registry import toolchain_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveSpot:
    """Where a group's states go: the run's folder in the archive, numbered from `first`."""

    uri: str
    home: Path
    date: dt.date
    run_id: str
    first: int


@dataclass(frozen=True)
class GroupJob:
    """One group and everything about the run its loop needs (plain data)."""

    state: GroupState
    run: ShippedRun
    settings: Settings
    repo_root: Path
    sub: str
    base_commit: str
    all_failures: list[TestCaseResult]
    knowledge: Knowledge
    spot: ArchiveSpot


@dataclass
class GroupDone:
    """What a group job brings back to the flow."""

    state: GroupState
    last: int = 0
    entries: list[ManifestEntry] = field(default_factory=list)
    records: list[CallRecord] = field(default_factory=list)


@task(
    name="repair-group",
    task_run_name="repair {job.state.group.id}",
    cache_policy=NO_CACHE,
    # The time limit is the run's (flows/limits.py), given at submit.
    retries=INFRA_RETRIES,
    retry_delay_seconds=INFRA_RETRY_DELAY_S,
    retry_condition_fn=retry_on_infrastructure,
)
def repair_group_job(job: GroupJob) -> GroupDone:
    """One group's loop on whichever worker the runner chose (see :func:`run_group_job`)."""
    return run_group_job(job)


def run_group_job(job: GroupJob) -> GroupDone:
    """The group's loop in whichever process runs it; never raises (as :func:`run_group`):
    a worker that cannot make the run ready hands the group to a person with the reason."""
    spot = job.spot
    archive = open_archive(spot.uri, home=spot.home).run("post_merge", spot.run_id, spot.date)
    numbers = itertools.count(spot.first)
    done = GroupDone(job.state)

    def save(state: GroupState, step: str) -> None:
        done.last = next(numbers)
        try:
            archive.put_json(f"groups/{state.group.id}/{done.last:03d}-{step}.json", state)
        except ArchiveError as exc:
            log.warning("archive: %s", exc)

    try:
        with on_worker(job.run, job.settings) as (settings, problem):
            if problem:
                raise AutopilotError(problem)
            done.state = _loop(job, settings, save, done)
    except AutopilotError as exc:
        done.state.handoff_reasons.append(f"{TOOL_FAILED}: {exc}")
        done.state.failed_step = done.state.step  # where a resumed run picks it up again
        done.state.step = "human"
        save(done.state, "tool-failed")
    done.entries = archive.entries()
    return done


def _loop(job: GroupJob, settings: Settings, save: SaveFn, done: GroupDone) -> GroupState:
    chain = toolchain_for(settings, job.run.toolchain)
    client = ModelClient.from_settings(settings) if settings.model_configured else None
    env = RepairEnv(
        client,
        settings,
        job.repo_root,
        job.sub,
        job.base_commit,
        chain,
        job.run.project,
        job.all_failures,
    )
    env.knowledge = job.knowledge
    try:
        with job_context(job.state.group.id):
            return run_group(job.state, env, save)
    finally:
        if client is not None:
            done.records = client.records
            client.close()


def spot_for(saver: Saver, settings: Settings) -> ArchiveSpot:
    """Where the groups shipped now archive their states: after every state saved so far."""
    run = saver.archive
    date = dt.date.fromisoformat(run.date)
    return ArchiveSpot(settings.archive_uri, settings.home, date, run.run_id, saver.next_number())


def gathered(done: GroupDone, saver: Saver, client: ModelClient | None) -> GroupState:
    """Take back a worker's group: its archived objects into the run's manifest, its state
    numbers behind the run's next one, its model calls into the run's records."""
    try:
        saver.archive.adopt(done.entries)
    except ArchiveError as exc:
        log.warning("archive: %s", exc)
    saver.skip_past(done.last)
    if client is not None:
        client.adopt_records(done.records)
    return done.state
