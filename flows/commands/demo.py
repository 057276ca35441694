"""`autopilot demo [--example PATH]` (``make demo``): the nightly on the bundled Rails example.

With no model configured it runs against the scripted demo model (flows/demo), labelled as such
in every output and in the UI (the flow run's tags); with ``MISTRAL_API_KEY`` or
``AUTOPILOT_MODEL_URL`` it runs the real model. It ends with three lines telling what to look at.
Exit 0 when the run finished (a rejection is part of the show), 2 on bad input.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flows.commands.nightly import _print_table
from flows.commands.render import print_lines, progress_on_stderr
from flows.demo.replies import CUSTOMER, SERIALIZER
from tasks.core.config import load_settings
from tasks.core.errors import AutopilotError
from tasks.core.types import Exchange
from tasks.generate.report import NightlyReport

#: The two files the demo works on: one accepted after a fix round, one rejected by the judge.
TARGETS = [CUSTOMER, SERIALIZER]


@contextmanager
def _scripted_model() -> Iterator[str]:
    """The scripted demo model serving, and the environment pointing every role at it."""
    from flows.demo.model import MODEL_NAME, demo_model

    with demo_model() as url:
        saved = dict(os.environ)
        os.environ.update(
            {
                "AUTOPILOT_MODEL_URL": url,
                "MISTRAL_API_KEY": "scripted-demo-model-needs-no-key",
                "AUTOPILOT_MODEL__JUDGE_SAMPLES": "1",
                "AUTOPILOT_GATES__FLAKY_RUNS": "1",
                **{f"AUTOPILOT_MODELS__{r}": MODEL_NAME for r in ("GENERATOR", "JUDGE")},
            }
        )
        try:
            yield url
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _nightly(repo: Path, label: str, verbose: int) -> NightlyReport:
    from prefect import tags

    from flows.nightly import with_task_runner
    from flows.runtime import flow_runtime

    with flow_runtime(verbose), tags("autopilot", "nightly", "demo", label), progress_on_stderr():
        report: NightlyReport = with_task_runner(None, 2)(
            repo=str(repo), only=TARGETS, max_iterations=3
        )
    return report


#: A line that names the error (a syntax error, an exception class), not RSpec's frame.
_ERROR_LINE = re.compile(r"syntax error|\b[A-Z]\w*(Error|Exception)\b")
#: The sandbox copy's directory in a message: shown relative to the project.
_SCRATCH = re.compile(r"/tmp/autopilot-[\w-]+/project/")


def _fed_back(exchange: Exchange) -> str | None:
    """The first line naming an error that a fix prompt carried back to the model."""
    text = "\n".join(m.get("content", "") for m in exchange.messages if m.get("role") == "user")
    lines = [
        line.strip()
        for line in text.splitlines()
        if _ERROR_LINE.search(line) and "Failure/Error" not in line and "# " not in line
    ]
    # The most telling first: a line with the error's words, then one that only names it.
    lines.sort(key=lambda line: len(line) < 20)
    return _SCRATCH.sub("", lines[0])[:160] if lines else None


def _story(report: NightlyReport) -> list[str]:
    """What happened to each file, round by round, in plain words."""
    lines = []
    for f in report.files:
        lines.append(f"{f.source} -> {f.spec}")
        for ex in f.exchanges:
            said = f"  round {ex.iteration}: {ex.prompt_name}"
            error = _fed_back(ex) if ex.prompt_name == "fix" else None
            lines.append(said + (f", the error fed back: {error}" if error else ""))
        final = f.files.get(f.spec)
        replies = [r for ex in f.exchanges if ex.prompt_name != "judge" for r in ex.replies]
        if final and replies and final not in replies[-1]:
            lines.append("  lint autocorrect rewrote the spec before it was run and proved")
        gates = ", ".join(f"{g.gate} {'ok' if g.passed else 'FAILED'}" for g in f.gates)
        lines.append(f"  gates: {gates or '-'} -> {f.verdict}" + _why(f.reasons, f.verdict))
    return lines


def _why(reasons: list[str], verdict: str) -> str:
    return f" ({'; '.join(reasons[:2])})" if reasons and verdict != "accepted" else ""


def _look_at(report: NightlyReport, repo: Path) -> list[str]:
    ui = os.environ.get("PREFECT_UI_URL") or os.environ.get("PREFECT_API_URL", "").removesuffix(
        "/api"
    )
    where = (
        f"{ui}/runs/flow-run/{report.run_id}"
        if ui
        else "`prefect server start`, then PREFECT_API_URL=http://127.0.0.1:4200/api make demo"
    )
    branch = report.branch or "(no branch: nothing accepted)"
    return [
        "Look at:",
        f"  1. the branch:  git -C {repo} log -p {branch}",
        f"  2. the archive: {report.archive_uri} (manifest.json lists every prompt, reply, "
        "report and verdict; files/<file>/round-2-fix-prompt.md carries the error fed back)",
        f"  3. the UI:      {where}",
    ]


def run(example: Path, verbose: int = 0) -> int:
    """Run the demo and print what happened, then what to look at."""
    try:
        settings = load_settings()
        from flows.demo.project import demo_copy

        repo = demo_copy(example.resolve(), settings.home)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    if settings.model_configured:
        label = "real-model"
        print_lines(f"Model: the configured model ({settings.models.generator}); repo: {repo}")
        report = _nightly(repo, label, verbose)
    else:
        from flows.demo.model import LABEL

        label = LABEL.replace(" ", "-")
        print_lines(
            f"Model: {LABEL} (no MISTRAL_API_KEY or AUTOPILOT_MODEL_URL set: replies written "
            f"for this example, served on loopback); repo: {repo}"
        )
        with _scripted_model():
            report = _nightly(repo, label, verbose)
    _print_table(report)
    print_lines(*_story(report))
    if label != "real-model":
        print_lines(f"(every reply above came from the {label.replace('-', ' ')})")
    print_lines(*_look_at(report, repo))
    return 0
