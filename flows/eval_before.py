"""`autopilot eval`'s "before" column: the same instrument as "after" on the same files.

After the nightly, each file it worked on that already had a spec gets that spec run in the
sandbox and judged exactly as ``autopilot judge`` does (:func:`judge.service.judge_in_repo`: the
static rubric, the LLM judge's samples, the combined score; a spec that does not pass scores 0
with no model call), on the evaluation's clone, whose working tree the nightly left as it was.
A file with no spec scores 0 (no test is the rubric's lowest level) without a call. The judge's
tokens are spent this run and counted with the table's tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from judge.service import judge_in_repo, model_client
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.evaluate.regressions import archived_targets
from tasks.evaluate.table import Before
from tasks.generate.types import FileOutcome

log = logging.getLogger(__name__)


def judge_before(
    project: Path, archive_uri: str | None, outcomes: Sequence[FileOutcome], settings: Settings
) -> tuple[dict[str, Before], int]:
    """source -> the judge's and the static rubric's score of its existing spec, for every file
    the nightly worked on (a file whose spec could not be judged is left out, with a warning),
    and the tokens the judge spent."""
    targets = {t.source: t for t in archived_targets(archive_uri)}
    client = model_client(settings)
    before: dict[str, Before] = {}
    try:
        for outcome in outcomes:
            target = targets.get(outcome.source)
            if outcome.verdict == "skipped" or target is None:
                continue
            if not target.specs:
                before[outcome.source] = Before(judge=0.0, static=0.0)
                continue
            try:
                report = judge_in_repo(project, target.spec, target.source, settings, client)
            except AutopilotError as exc:
                log.warning("%s: the existing spec could not be judged: %s", target.source, exc)
                continue
            static = report.static.score if report.static is not None else 0.0
            before[outcome.source] = Before(spec=target.spec, judge=report.score, static=static)
        return before, client.tokens if client is not None else 0
    finally:
        if client is not None:
            client.close()
