"""`autopilot judge SPEC [--source SRC] [--repo PATH] [--json]` and `autopilot judge --calibrate`.

The spec runs in the sandbox first; only a passing spec gets the static rubric and, when a model
is configured, the LLM judge. Exit 0 when judged, 1 when the spec did not pass (no model call,
score 0), 2 for bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.config import load_settings
from tasks.core.errors import AutopilotError, BadInputError

if TYPE_CHECKING:
    from judge.service import CalibrationReport, JudgeReport


def _print_report(report: JudgeReport) -> None:
    from rich.console import Console

    console = Console()
    v = report.validation
    if not report.passed:
        why = v.load_error or v.reason or "failing examples"
        console.print(f"{report.spec}: did not pass execution, score 0 ({why.splitlines()[0]})",
                      markup=False)  # fmt: skip
        return
    console.print(f"{report.spec} (source {report.source}): score {report.score:.2f}", markup=False)
    if report.static is not None:
        console.print(f"  static rubric {report.static.score:.2f}", markup=False)
        for f in report.static.findings:
            console.print(f"    {f.path}:{f.line}: {f.rule}: {f.message}", markup=False)
    if report.llm is not None:
        llm = report.llm
        console.print(f"  LLM judge {llm.score:.2f} (samples {llm.samples})", markup=False)
        for r in llm.reasons:
            console.print(f"    + {r}", markup=False)
        for m in llm.missing:
            console.print(f"    - missing: {m}", markup=False)


def _print_calibration(report: CalibrationReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Judge calibration against labelled cases")
    for col in ("case", "label", "passed", "static", "llm", "spread", "score", "agrees"):
        table.add_column(col)

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for r in report.rows:
        cells = (f(r.label), "yes" if r.passed else "no", f(r.static_score), f(r.llm_score))
        table.add_row(r.id, *cells, f(r.spread), f(r.score), "yes" if r.agrees else "NO")
    console = Console()
    console.print(table)
    console.print(
        f"agreement (within one level) {report.agreement:.0%}, exact {report.exact:.0%}, "
        f"mean |error| {report.mean_abs_error:.2f}, mean spread {f(report.mean_spread)}",
        markup=False,
    )


def run(
    spec: str | None,
    source: str | None,
    repo: Path | None,
    json_out: bool,
    calibrate: bool = False,
) -> int:
    """Judge one spec, or calibrate the judge against the labelled cases."""
    from judge.service import calibrate as run_calibration
    from judge.service import judge_in_repo, model_client

    try:
        target = (repo or Path.cwd()).resolve()
        settings = load_settings(target if target.is_dir() else None)
        client = model_client(settings)
        if calibrate:
            cal = run_calibration(settings, client)
            if json_out:
                sys.stdout.write(cal.model_dump_json(indent=2) + "\n")
            else:
                _print_calibration(cal)
            return 0
        if spec is None:
            raise BadInputError("give a SPEC to judge, or --calibrate")
        report = judge_in_repo(target, spec, source, settings, client)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _print_report(report)
    return 0 if report.passed else 1
