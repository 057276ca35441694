"""A repair group as a job on a worker: what it archives is numbered after the run's states and
handed back for the run's manifest; a worker that cannot make the run ready hands the group to
a person with the reason (and where a resumed run picks it up), never crashes the run."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from flows.post_merge_keep import Saver
from flows.repair_jobs import GroupJob, gathered, run_group_job, spot_for
from tasks.core.config import load_settings
from tasks.keep.archive import open_archive
from tasks.repair.knowledge import Knowledge
from tasks.repair.loop import TOOL_FAILED
from tasks.scale import ShippedRun, release_run, shipped_settings
from tests.tasks.repair.test_resume import RUN, group, state


def test_a_worker_that_cannot_see_the_project_hands_the_group_to_a_person(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path).model_copy(update={"archive": str(tmp_path / "archive")})
    archive = open_archive(settings.archive_uri, home=settings.home)
    run_archive = archive.run("post_merge", RUN, dt.date(2026, 12, 6))
    saver = Saver(run_archive)
    saver.run(state(), "scout")  # state-001
    shipped, refs = shipped_settings(settings)
    missing = tmp_path / "not-here"
    run = ShippedRun(
        token="t", toolchain="python-pytest", project=missing, worktree=missing, secrets=refs
    )
    job = GroupJob(
        group("g-1"), run, shipped, tmp_path, "", "c" * 40, [], Knowledge(),
        spot_for(saver, settings),
    )  # fmt: skip

    done = run_group_job(job)

    assert done.state.step == "human" and done.state.failed_step == "diagnose"
    [reason] = done.state.handoff_reasons
    assert reason.startswith(TOOL_FAILED) and str(missing) in reason and "same path" in reason
    # Archived by the worker after the run's state, handed back for the run's manifest.
    assert [e.key for e in done.entries] == ["groups/g-1/002-tool-failed.json"]
    assert gathered(done, saver, None) is done.state
    saver.run(state(), "repaired")  # numbered after the worker's
    manifest = run_archive.finalize()
    keys = [o.key for o in manifest.objects]
    assert "groups/g-1/002-tool-failed.json" in keys and "state-003-repaired.json" in keys
    assert release_run("t") == "closed"  # what the flow asks every worker at the end
