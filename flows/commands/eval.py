"""`autopilot eval --repo PATH [--regressions N] [--json]`: the quality table of a real run
(flows/evaluate.py runs it in a clone of the repository). Exit 0 when the table was produced, 2 on
bad input or configuration, 1 when a flow failed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flows.commands.render import Column, print_lines, print_table
from tasks.core.errors import AutopilotError

if TYPE_CHECKING:
    from tasks.evaluate.table import EvalReport


def _print(report: EvalReport) -> None:
    from tasks.evaluate.table import rows

    columns = [Column("metric"), Column("value", justify="right")]
    print_table(f"Autopilot evaluation of {report.repo}", columns, list(rows(report.table)))
    print_lines(*(f"regression: {m}" for m in report.mutations), report.table.price_note)


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
