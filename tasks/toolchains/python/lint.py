"""ruff on a Python project's test files: ``--fix`` when asked, offences read from its JSON.

ruff always runs from Autopilot's environment (it needs no project code) and follows the
project's ruff configuration.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tasks.core.types import LintOffense
from tasks.toolchains.base import LINT_TIMEOUT_S, CommandRunner, ToolchainError
from tasks.toolchains.diagnose import relative_to_repo
from tasks.toolchains.python.run import ENV
from tasks.toolchains.runs import relative_path, tail


def lint(
    repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
) -> list[LintOffense]:
    """ruff check the given files (``--fix`` when asked); returns the remaining offences.

    Raises:
        ToolchainError: ruff failed (exit 2: bad configuration, missing file) or printed no JSON.
    """
    if not files:
        return []
    argv = [sys.executable, "-m", "ruff", "check", "--output-format", "json", "--no-cache"]
    if autocorrect:
        argv.append("--fix")
    cmd = runner.run([*argv, "--", *files], cwd=repo, env=ENV, timeout_s=LINT_TIMEOUT_S)
    if cmd.reason or cmd.exit_code not in (0, 1):
        why = (
            cmd.reason or ruff_error(relative_to_repo(cmd.stderr, repo)) or f"exit {cmd.exit_code}"
        )
        raise ToolchainError(
            f"ruff: {why} (ruff follows the project's ruff configuration: fix it, or lint "
            "with a ruff that reads it)"
        )
    return parse_ruff_json(cmd.stdout, repo)


def ruff_error(stderr: str) -> str:
    """ruff's own account of a failure, in one line: its ``Cause:`` lines (the last is the
    most specific) or its first line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    causes = [ln.removeprefix("Cause:").strip() for ln in lines if ln.startswith("Cause:")]
    if causes:
        detail = next((ln for ln in lines if not re.match(r"(Cause:|\||\d+ \||ruff )", ln)), "")
        parts = [causes[0], causes[-1], detail] if len(causes) > 1 else [causes[0], detail]
        return ": ".join(p for p in dict.fromkeys(parts) if p)
    return lines[0] if lines else ""


def parse_ruff_json(text: str, repo: Path) -> list[LintOffense]:
    """Offences from ``ruff check --output-format json`` output."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, list):
        raise ToolchainError(f"ruff printed no JSON report: {tail(text, 300)!r}")
    offenses: list[LintOffense] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        loc = item.get("location") or {}
        offenses.append(
            LintOffense(
                path=relative_path(str(item.get("filename", "")), repo),
                line=int(loc.get("row") or 0),
                column=int(loc.get("column") or 0),
                rule=str(item.get("code") or "syntax-error"),
                message=str(item.get("message", "")),
                correctable=item.get("fix") is not None,
            )
        )
    return offenses
