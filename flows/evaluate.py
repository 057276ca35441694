"""`autopilot eval`: the field reports' quality table from a real nightly (and a repair of
injected regressions), run in a clone so the user's branches and working tree are never touched.

The nightly runs on the clone; with ``regressions`` the baseline suite's coverage picks that many
covered source lines, the mutations are committed on a new branch of the clone
(:mod:`tasks.evaluate.regressions`), and the post-merge repair runs on that commit with no human
wait (a hand-off ends "needs human" at once, which is what the human intervention rate counts).
Both runs are archived under ``$AUTOPILOT_HOME/eval/<stamp>`` (a local directory, so the table can
read the nightly's targets back; the repair's knowledge of past fixes is that archive's, so it
starts empty). Every cache (nightly outcomes, repair replies and re-runs, mutants) is private to
the run: ``AUTOPILOT_CACHE_DIR`` points at the clone's temporary directory while the flows run,
so nothing is re-used from (or written to) the nightly's caches and every token is really spent;
the run history is private too (a store in the same directory).
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flows.eval_before import judge_before
from flows.nightly import nightly
from flows.post_merge import post_merge
from flows.runtime import flow_runtime
from tasks.core.config import load_settings
from tasks.evaluate.regressions import Injected, inject
from tasks.evaluate.table import EvalReport, clone, quality_table
from tasks.keep.git import subdir_in_repo
from tasks.repair.state import RepairSummary


def evaluate(
    repo: Path,
    regressions: int = 0,
    *,
    seed: int = 0,
    only: list[str] | None = None,
    verbose: bool | int = False,
) -> EvalReport:
    """The nightly (and the repair of `regressions` injected mutations) on a clone of `repo`,
    and the quality table that follows from them."""
    from prefect import tags
    from prefect.task_runners import ThreadPoolTaskRunner

    settings = load_settings(repo)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    archive = settings.home / "eval" / stamp
    root, sub = subdir_in_repo(repo.resolve())
    injected = Injected()
    repair: RepairSummary | None = None
    with tempfile.TemporaryDirectory(prefix="autopilot-eval-") as tmp:
        work = clone(root, Path(tmp) / "repo")
        project = work / sub if sub else work
        runner: Any = ThreadPoolTaskRunner(max_workers=settings.model.max_concurrency)
        with private_cache(Path(tmp) / "cache"), flow_runtime(verbose), tags("autopilot", "eval"):
            report = nightly.with_options(task_runner=runner)(
                repo=str(project), only=list(only) if only else None, archive=str(archive)
            )
            before, before_tokens = judge_before(
                project, report.archive_uri, report.files, settings
            )
            if regressions:
                injected = inject(project, work, sub, regressions, seed, load_settings(project))
                if injected.commit:
                    repair = post_merge(
                        repo=str(project),
                        reports=None,
                        ref=injected.commit,
                        human_timeout=0,
                        archive=str(archive),
                    )
    table = quality_table(
        report.files,
        before=before,
        nightly_tokens=report.tokens + before_tokens,
        generator_model=settings.models.generator,
        repair=repair,
        regressions=len(injected.mutations),
        repair_model=settings.models.surgeon,
    )
    return EvalReport(
        repo=str(repo.resolve()),
        table=table,
        mutations=injected.mutations,
        nightly=report.public(),
        repair=repair,
    )


@contextmanager
def private_cache(directory: Path) -> Iterator[Path]:
    """``AUTOPILOT_CACHE_DIR`` set to `directory`, and the run history to a store inside it
    (``AUTOPILOT_HISTORY__URL``: an eval neither skips a file nor quarantines a test because of
    the nightlies' memory, and adds nothing to their trend), while the block runs (the flows
    load their settings themselves, and the environment wins over autopilot.toml); then
    restored."""
    private = {
        "AUTOPILOT_CACHE_DIR": str(directory),
        "AUTOPILOT_HISTORY__URL": f"sqlite:///{directory / 'history.sqlite3'}",
    }
    old = {name: os.environ.get(name) for name in private}
    os.environ.update(private)
    try:
        yield directory
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
