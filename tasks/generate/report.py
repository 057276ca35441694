"""The nightly's report: the JSON document, the UI table and summary, the branch content and
the archive of every prompt, reply, generated file, report and verdict."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from tasks.audit.report import AuditReport
from tasks.core.errors import ArchiveError, AutopilotError
from tasks.generate.charts import archive_quality_chart, chart_markdown
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome, FileSummary
from tasks.keep.archive import RunArchive, open_archive
from tasks.keep.git import commit_files_to_new_branch, push_branch, unique_branch_name

log = logging.getLogger(__name__)

#: Why targets are skipped when no model is configured (exit 0, issue 5).
NO_MODEL = "no model configured"

if TYPE_CHECKING:
    from tasks.model.client import ModelClient


def _unset(value: str | None) -> bool:
    return not value


class SuiteProof(BaseModel):
    """What the whole-branch proof (tasks/generate/suite_gate.py) did: its runs and wall time,
    the sources proved together, and the ones it dropped at the ``suite`` gate."""

    runs: int = 0
    seconds: float = Field(0.0, description="Wall time of every together-run")
    proved: list[str] = Field(default_factory=list, description="Sources proved together")
    dropped: dict[str, str] = Field(
        default_factory=dict, description="Source -> why it was rejected at the suite gate"
    )


class NightlySummary(BaseModel):
    """The ``autopilot nightly --json`` document (issue 5's contract); ``push_error`` and
    ``baseline_error`` appear only when there is one."""

    run_id: str
    repo: str
    base_commit: str
    branch: str | None
    archive_uri: str | None
    model_calls: int
    tokens: int
    files: list[FileSummary]
    push_error: str | None = Field(None, exclude_if=_unset)
    baseline_error: str | None = Field(None, exclude_if=_unset)
    pull_request: str | None = Field(None, exclude_if=_unset)


class NightlyReport(BaseModel):
    """What one nightly run did (``autopilot nightly --json`` is :meth:`public`)."""

    run_id: str
    repo: str
    base_commit: str
    branch: str | None = None
    branch_commit: str | None = None
    archive_uri: str | None = None
    model_calls: int = 0
    tokens: int = 0
    files: list[FileOutcome] = Field(default_factory=list)
    push_error: str | None = None
    chart_uri: str | None = Field(None, description="The archived quality-by-kind chart")
    baseline_error: str | None = Field(
        None, description="The baseline suite did not run: nothing was generated against it"
    )
    pull_request: str | None = Field(
        None, description="The pull request opened (its URL), or why none was (--pr only)"
    )
    suite_proof: SuiteProof | None = Field(
        None, description="The accepted files run together with the suite (the suite gate)"
    )

    def public(self) -> NightlySummary:
        """Issue 5's JSON contract (plus ``push_error`` when a requested push failed)."""
        return NightlySummary(
            run_id=self.run_id,
            repo=self.repo,
            base_commit=self.base_commit,
            branch=self.branch,
            archive_uri=self.archive_uri,
            model_calls=self.model_calls,
            tokens=self.tokens,
            files=[f.public() for f in self.files],
            push_error=self.push_error,
            baseline_error=self.baseline_error,
            pull_request=self.pull_request,
        )

    def exit_code(self) -> int:
        """0 when every target was accepted or skipped for want of a model; 1 when any was
        rejected or errored, skipped for another reason (a spent budget), the push failed, or
        the baseline suite did not run."""
        bad = any(
            f.verdict in ("rejected", "error")
            or (f.verdict == "skipped" and f.reasons != [NO_MODEL])
            for f in self.files
        )
        return 1 if bad or self.push_error or self.baseline_error else 0


def merge_accepted(outcomes: list[FileOutcome], prefix: str = "") -> dict[str, bytes]:
    """The files to commit: every accepted outcome's new or changed files, repo-relative.

    Two accepted files that write the same path with different content (two new factories for
    one model) cannot both be right: the later one becomes an error naming the path, and none
    of its files are committed. Outcomes are changed in place.
    """
    merged: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for out in outcomes:
        if out.verdict != "accepted":
            continue
        files = {f"{prefix}/{p}" if prefix else p: t.encode() for p, t in out.files.items()}
        clash = [p for p, data in files.items() if p in merged and merged[p] != data]
        if clash:
            out.verdict, out.gate = "error", None
            out.reasons = [
                f"{clash[0]}: also written for {owner[clash[0]]} with other content; not committed"
            ]
            continue
        for path, data in files.items():
            merged[path] = data
            owner.setdefault(path, out.source)
    return merged


def commit_accepted(
    root: Path,
    sub: str,
    base_commit: str,
    outcomes: list[FileOutcome],
    today: dt.date,
    *,
    push: bool = False,
    branch: str | None = None,
    title: str = "Autopilot nightly",
) -> tuple[str | None, str | None, str | None]:
    """Commit the accepted files on a new branch on top of `base_commit`: `branch`, default
    ``autopilot/nightly-<date>`` (``-2``, ``-3``... when taken; never the base branch, never
    the user's checkout), and push it when asked.

    Returns:
        (branch, its commit, why the push failed): all None when nothing was accepted.
    """
    files = merge_accepted(outcomes, prefix=sub)
    if not files:
        return None, None, None
    branch = unique_branch_name(root, branch or f"autopilot/nightly-{today.isoformat()}")
    accepted = [o.source for o in outcomes if o.verdict == "accepted"]
    message = f"{title}: tests for {len(accepted)} file(s)\n\n" + "\n".join(
        f"- {s}" for s in accepted
    )
    sha = commit_files_to_new_branch(root, base_commit, branch, files, message)
    push_error = None
    if push:
        try:
            push_branch(root, branch)
        except AutopilotError as exc:
            push_error = str(exc)
    return branch, sha, push_error


def archive_run(
    report: NightlyReport,
    baseline: AuditReport | None,
    targets: list[Target],
    uri: str,
    today: dt.date,
    *,
    flow: str = "nightly",
    extra: dict[str, str | dict[str, Any]] | None = None,
) -> None:
    """Everything the run produced, under ``<uri>/<flow>/<date>/<run-id>/`` (`extra`: more
    objects by name, a text or a JSON document); an archive that fails is logged and leaves
    ``archive_uri`` empty, it never loses the run's result."""
    try:
        run = open_archive(uri).run(flow, report.run_id, today)
        for name, value in (extra or {}).items():
            _put(run, name, value)
        run.put_json("baseline/audit.json", baseline.model_dump(mode="json") if baseline else {})
        run.put_json("targets.json", [t.model_dump(mode="json") for t in targets])
        for outcome in report.files:
            archive_outcome(run, outcome)
        if report.files:
            rows = [o.public().model_dump(mode="json") for o in report.files]
            report.chart_uri = archive_quality_chart(run, rows)
        report.archive_uri = run.uri
        if report.suite_proof is not None:
            run.put_json("suite.json", report.suite_proof.model_dump(mode="json"))
        run.put_json("summary.json", report.public().model_dump(mode="json"))
        run.put_text("summary.md", markdown_summary(report))
        run.finalize()
    except ArchiveError as exc:
        log.error("archive %s failed: %s", uri, exc)
        report.archive_uri = None


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.0%}" if pct else f"{value:.2f}"


def table_rows(outcomes: Iterable[FileOutcome]) -> list[dict[str, object]]:
    """Rows of the Prefect table artifact (issue 5's columns)."""
    return [
        {
            "file": o.source,
            "kind": o.kind,
            "verdict": o.verdict + (" (cached)" if o.cached else ""),
            "failed gate": o.gate or "-",
            "iterations": o.iterations,
            "coverage before": _fmt(o.coverage_before, pct=True),
            "coverage after": _fmt(o.coverage_after, pct=True),
            "judge score": _fmt(o.judge_score),
            "mutation score": _fmt(o.mutation_score),
            "tokens": o.tokens,
        }
        for o in outcomes
    ]


def markdown_summary(report: NightlyReport) -> str:
    """A short markdown summary for the Prefect UI and the archive."""
    counts: dict[str, int] = {}
    for f in report.files:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    lines = [
        f"# Nightly of {report.repo} at {report.base_commit[:12]}",
        "",
        "- targets: " + (", ".join(f"{v} **{n}**" for v, n in sorted(counts.items())) or "none"),
        f"- branch: `{report.branch}`" if report.branch else "- branch: none (nothing accepted)",
        f"- model calls: **{report.model_calls}**, tokens: **{report.tokens}**",
        f"- archive: `{report.archive_uri}`" if report.archive_uri else "- archive: none",
    ]
    proof = report.suite_proof
    if proof is not None:
        lines.append(
            f"- whole-branch proof: {len(proof.proved)} file(s) passed together with the suite "
            f"in {proof.runs} run(s), {proof.seconds:.1f} s; {len(proof.dropped)} dropped"
        )
    if report.push_error:
        lines.append(f"- push failed: {report.push_error}")
    if report.baseline_error:
        lines.insert(2, f"**Nothing generated**: {report.baseline_error}\n")
    problems = [f for f in report.files if f.verdict in ("rejected", "error")]
    if problems:
        lines += ["", "## Not accepted"]
        for f in problems:
            why = f.reasons[0] if f.reasons else ""
            lines.append(f"- `{f.source}`: {f.verdict} at {f.gate or '-'}: {why}")
    return "\n".join(lines) + "\n" + chart_markdown(report.chart_uri)


def _slug(source: str) -> str:
    return source.replace("/", "__")


def _messages_text(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages) + "\n"


def _put(run: RunArchive, relpath: str, value: str | dict[str, Any] | list[Any]) -> None:
    """Archive one object; a refused object (a secret-looking name) is logged and skipped."""
    try:
        if isinstance(value, str):
            run.put_text(relpath, value)
        else:
            run.put_json(relpath, value)
    except ArchiveError as exc:
        log.warning("archive: %s not archived: %s", relpath, exc)


def archive_outcome(run: RunArchive, outcome: FileOutcome) -> None:
    """Every prompt, reply, generated file, validation and verdict of one file."""
    base = f"files/{_slug(outcome.source)}"
    for ex in outcome.exchanges:
        stem = f"{base}/round-{ex.iteration}-{ex.prompt_name}"
        _put(run, f"{stem}-prompt.md", _messages_text(ex.messages))
        for k, reply in enumerate(ex.replies, start=1):
            _put(run, f"{stem}-reply-{k}.md", reply)
        if ex.error:
            _put(run, f"{stem}-error.txt", ex.error + "\n")
    for path, text in outcome.files.items():
        _put(run, f"{base}/generated/{path}", text)
    if outcome.validation is not None:
        _put(run, f"{base}/validation.json", outcome.validation.model_dump(mode="json"))
    for i, rerun in enumerate(outcome.reruns, start=1):
        _put(run, f"{base}/rerun-{i}.json", rerun.model_dump(mode="json"))
    if outcome.judge is not None:
        _put(run, f"{base}/judge.json", outcome.judge.model_dump(mode="json"))
    verdict = outcome.public().model_dump(mode="json") | {
        "skill": outcome.skill,
        "cached": outcome.cached,
        "model_calls": outcome.model_calls,
        "files": sorted(outcome.files),
    }
    _put(run, f"{base}/verdict.json", verdict)


def count_calls(report: NightlyReport, client: ModelClient | None) -> None:
    """The run's model calls and tokens: the shared client's, or (the files ran in other
    processes, Dask workers) the sum of the outcomes that were not re-used."""
    if client is not None:
        report.model_calls, report.tokens = client.calls, client.tokens
        client.close()
        return
    fresh = [o for o in report.files if not o.cached]
    report.model_calls = sum(o.model_calls for o in fresh)
    report.tokens = sum(o.tokens for o in fresh)
