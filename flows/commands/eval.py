"""`autopilot eval --repo PATH [--regressions N] [--json]`: the quality table of a real run
(flows/evaluate.py runs it in a clone of the repository). Exit 0 when the table was produced, 2 on
bad input or configuration, 1 when a flow failed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.errors import AutopilotError

if TYPE_CHECKING:
    from tasks.evaluate.table import EvalReport


def _print(report: EvalReport) -> None:
    from rich.console import Console
    from rich.table import Table

    from tasks.evaluate.table import rows

    out = Table(title=f"Autopilot evaluation of {report.repo}")
    out.add_column("metric")
    out.add_column("value", justify="right")
    for name, value in rows(report.table):
        out.add_row(name, value)
    console = Console()
    console.print(out)
    for m in report.mutations:
        console.print(f"regression: {m}", markup=False)
    console.print(report.table.price_note, markup=False)


def run(
    repo: Path,
    regressions: int = 0,
    json_out: bool = False,
    verbose: bool | int = False,
    seed: int = 0,
    only: list[str] | None = None,
) -> int:
    """Evaluate the autopilot on `repo` and print the quality table.

    Args:
        repo: the target repository (or a project directory inside one); it is cloned, never
            modified.
        regressions: mutations to inject into covered source lines before the repair (0: the
            nightly only).
        json_out: print one JSON document ``{"repo", "table", "mutations", "nightly",
            "repair"}`` on stdout.
        verbose: log progress on stderr.
        seed: the mutation choice's random seed.
        only: source globs restricting the nightly's targets (as ``nightly --only``).

    Returns:
        0 when the table was produced, 1 when a flow failed, 2 on bad input or configuration.
    """
    repo = Path(repo)
    from flows.inputs import check_eval

    try:
        check_eval(repo, regressions, only)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    from flows.evaluate import evaluate

    try:
        report = evaluate(repo, regressions, seed=seed, only=only, verbose=verbose)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print(report)
    return 0
