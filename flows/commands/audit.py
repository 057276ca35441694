"""`autopilot audit --repo PATH [--ref REF] [--json]`: coverage, lint, static rubric, pass/fail.

No model is involved. Inputs are checked before the flow starts, so a bad repository or ref is one
line on stderr (exit 2), never a flow-run traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tasks.audit import AuditReport, table_rows
from tasks.config import load_settings
from tasks.discovery import detect_toolchain
from tasks.errors import AutopilotError
from tasks.git import resolve_commit, subdir_in_repo


def _print_table(report: AuditReport) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    table = Table(title=f"Audit of {report.repo} at {report.commit[:12]} ({report.toolchain})")
    rows = table_rows(report)
    for column in ("file", "kind", "status", "coverage", "static", "findings", "lint"):
        table.add_column(column, overflow="fold")
    style = {"tested": "green", "untested": "yellow", "failing": "red"}
    for row in rows:
        table.add_row(
            Text(str(row["file"])),
            str(row["kind"]),
            Text(str(row["status"]), style[str(row["status"])]),
            str(row["coverage"]),
            str(row["static"]),
            str(row["findings"]),
            str(row["lint"]),
        )
    console.print(table)
    s = report.summary
    console.print(
        f"{s.files} files, {s.untested} untested, line coverage {s.line_coverage:.1%}, "
        f"spec files passing {s.specs_passing}, failing {s.specs_failing}",
        markup=False,
    )


def check_inputs(repo: Path, ref: str) -> None:
    """Raise BadInputError/ConfigError for what would make the flow fail at once."""
    from tasks.errors import BadInputError

    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    settings = load_settings(repo)
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, ref)
    detect_toolchain(repo, settings.toolchain)


def run(repo: Path, ref: str, json_out: bool, verbose: bool = False) -> int:
    """Audit `repo` at `ref` and print the report (JSON or a table).

    Returns:
        0 when the audit ran; 2 for bad input or configuration (one line on stderr).
    """
    try:
        check_inputs(repo, ref)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    from flows.audit import audit
    from flows.runtime import flow_runtime

    with flow_runtime(verbose):
        report = audit(repo=str(repo), ref=ref)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print_table(report)
    return 0
