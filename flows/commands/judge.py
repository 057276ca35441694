"""`autopilot judge SPEC [--source SRC] [--repo PATH] [--json]` and `autopilot judge --calibrate`.

The spec runs in the sandbox first; only a passing spec gets the static rubric and, when a model
is configured, the LLM judge. Exit 0 when judged, 1 when the spec did not pass (no model call,
score 0), 2 for bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flows.commands.render import Column, print_lines, print_table
from tasks.core.config import load_settings
from tasks.core.errors import AutopilotError, BadInputError

if TYPE_CHECKING:
    from judge.service import CalibrationReport, JudgeReport


def _print_report(report: JudgeReport) -> None:
    v = report.validation
    if not report.passed:
        why = v.load_error or v.reason or "failing examples"
        print_lines(f"{report.spec}: did not pass execution, score 0 ({why.splitlines()[0]})")
        return
    lines = [f"{report.spec} (source {report.source}): score {report.score:.2f}"]
    if report.static is not None:
        lines.append(f"  static rubric {report.static.score:.2f}")
        lines += [f"    {f.path}:{f.line}: {f.rule}: {f.message}" for f in report.static.findings]
    if report.llm is not None:
        llm = report.llm
        lines.append(f"  LLM judge {llm.score:.2f} (samples {llm.samples})")
        lines += [f"    + {r}" for r in llm.reasons]
        lines += [f"    - missing: {m}" for m in llm.missing]
    print_lines(*lines)


def _print_calibration(report: CalibrationReport) -> None:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    headers = ("case", "label", "passed", "static", "llm", "spread", "score", "agrees")
    rows = [
        [
            r.id,
            f(r.label),
            "yes" if r.passed else "no",
            f(r.static_score),
            f(r.llm_score),
            f(r.spread),
            f(r.score),
            "yes" if r.agrees else "NO",
        ]
        for r in report.rows
    ]
    columns = [Column(h, path=h == "case") for h in headers]
    print_table("Judge calibration against labelled cases", columns, rows)
    print_lines(
        f"agreement (within one level) {report.agreement:.0%}, exact {report.exact:.0%}, "
        f"mean |error| {report.mean_abs_error:.2f}, mean spread {f(report.mean_spread)}"
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
