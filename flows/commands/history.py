"""`autopilot history [--repo PATH] [--runs N] [--test ID] [--chart PATH] [--json]`: memory
across runs, as the run history store holds it.

No Prefect import: the store is read directly. Tables in a terminal (plain lines elsewhere):
the trend (one row per run, a repair's shards merged), the tests quarantined as flaky with their
evidence, the files the last nightly skipped with the reason, and with ``--test`` one test's
results. ``--json`` prints one document (:class:`tasks.history.trend.HistoryDocument`);
``--chart`` writes the trend chart as a PNG. A store that cannot be read is one line on stderr,
exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flows.commands.render import Column, print_lines, print_table
from tasks.core.config import load_settings
from tasks.core.errors import AutopilotError
from tasks.history.trend import HistoryDocument, trend_rows


def _print(doc: HistoryDocument) -> None:
    rows = trend_rows(doc.runs)
    headers = list(rows[0]) if rows else ["run", "started", "flow", "commit"]
    columns = [Column(h, path=h in ("commit", "started")) for h in headers]
    print_table(
        f"History of {doc.repo} ({len(doc.runs)} runs)",
        columns,
        [[r[h] for h in headers] for r in rows],
    )
    if doc.quarantined:
        print_table(
            "Quarantined as flaky (never sent to repair)",
            [Column("test", path=True), Column("evidence")],
            [[q.test_key, q.line()] for q in doc.quarantined],
        )
    else:
        print_lines("Quarantined as flaky (never sent to repair): none")
    if doc.skipped:
        print_table(
            "Skipped by memory in the last nightly",
            [Column("file", path=True), Column("reason")],
            [[v.source, v.reasons[0] if v.reasons else ""] for v in doc.skipped],
        )
    else:
        print_lines("Skipped by memory in the last nightly: none")
    if doc.test is not None:
        print_table(
            f"Results of {doc.test.test}",
            [
                Column("observed"),
                Column("run"),
                Column("commit"),
                Column("source"),
                Column("status"),
            ],
            [
                [f"{r.observed_at:%Y-%m-%d %H:%M}", r.run_id[:8], r.commit[:12], r.source, r.status]
                for r in doc.test.results
            ],
        )
        if doc.test.quarantine is not None:
            print_lines(f"quarantined: {doc.test.quarantine.line()}")
    print_lines(f"store: {doc.store}")


def run(
    repo: Path,
    json_out: bool,
    runs: int | None = None,
    test: str | None = None,
    chart: Path | None = None,
) -> int:
    """Print what the run history holds about `repo`.

    Returns:
        0 when read; 2 when the repository or the store cannot be used (one line on stderr).
    """
    from flows.memory import history_document
    from tasks.history.db import HistoryUnavailable

    try:
        settings = load_settings(repo)
        doc = history_document(settings, repo, runs=runs, test=test)
        if chart is not None:
            from tasks.history.chart import render_trend_chart

            title = f"Autopilot trend: {repo.resolve().name}"
            chart.write_bytes(render_trend_chart(doc.runs, title))
    except (AutopilotError, HistoryUnavailable) as exc:
        print(f"autopilot: error: history: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"autopilot: error: {chart}: {exc.strerror}", file=sys.stderr)
        return 2
    if json_out:
        sys.stdout.write(doc.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print(doc)
    return 0
