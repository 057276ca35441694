"""What a nightly shows and remembers when it ends: the table and summary artifacts, an
``autopilot.gate.failed`` event per rejection, its records in the run history and the history
artifact (the trend, the quarantine, tonight's skips)."""

from __future__ import annotations

from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.audit import artifact_key
from flows.memory import Memory
from flows.memory_runs import nightly_batch, publish_history
from flows.nightly_baseline import Baseline
from tasks.generate.cache import skip_key
from tasks.generate.job import skipped
from tasks.generate.report import NightlyReport, markdown_summary, table_rows
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.model.client import ModelClient

GATE_FAILED_EVENT = "autopilot.gate.failed"


def remembered_skips(memory: Memory, project: Path, targets: list[Target]) -> list[Target]:
    """The targets to work on tonight; the ones the history skips are kept on `memory` (a file
    rejected at one gate, its source, skill and prompts unchanged: see tasks/history/rules.py)."""
    memory.skip_keys = {t.source: skip_key(project, t) for t in targets}
    known = {s: k for s, k in memory.skip_keys.items() if k is not None}
    memory.skipped = memory.skips(known)
    return [t for t in targets if t.source not in memory.skipped]


def with_skips(targets: list[Target], done: list[FileOutcome], memory: Memory) -> list[FileOutcome]:
    """Every target's outcome in target order: the worked ones and the skipped ones."""
    by_source = {o.source: o for o in done}
    out = []
    for t in targets:
        skip = memory.skipped.get(t.source)
        out.append(by_source[t.source] if skip is None else skipped(t, skip.reason))
    return out


def publish_nightly(
    report: NightlyReport,
    path: Path,
    memory: Memory,
    baseline: Baseline,
    client: ModelClient | None,
) -> None:
    """The run's artifacts and events, and its records in the run history."""
    key = artifact_key("nightly", path.name)
    create_table_artifact(table_rows(report.files), key=key, description=f"Nightly of {path.name}")
    create_markdown_artifact(markdown_summary(report), key=f"{key}-summary")
    emit_rejections(report)
    coverage = None if baseline.error else baseline.report.summary.line_coverage
    examples = [] if baseline.error else baseline.suite.validation.examples
    records = client.records if client is not None else None
    batch = nightly_batch(
        memory, report, coverage, examples, memory.skip_keys, memory.skipped, records
    )
    memory.write(batch)
    publish_history(memory, path.name, skips=list(memory.skipped.values()))
    memory.close()


def emit_rejections(report: NightlyReport) -> None:
    """An ``autopilot.gate.failed`` event per rejected file."""
    from prefect.events import emit_event

    for f in report.files:
        if f.verdict != "rejected":
            continue
        emit_event(
            event=GATE_FAILED_EVENT,
            resource={
                "prefect.resource.id": f"autopilot.file.{f.source}",
                "prefect.resource.name": f.source,
            },
            payload={
                "repo": report.repo,
                "run_id": report.run_id,
                "source": f.source,
                "spec": f.spec,
                "gate": f.gate,
                "reasons": f.reasons[:5],
            },
        )
