"""ESLint for test files: the project's configuration when it has one, else Autopilot's small
default (``toolchains/node/eslint.config.mjs``); ``--fix`` when asked; errors only.

The project's ESLint (from its ``node_modules``) runs its configuration when it has both, else
Autopilot's ESLint 9 (the default configuration is written for it: an older ESLint of the
project cannot read it). A legacy ``.eslintrc*`` configuration runs with
``ESLINT_USE_FLAT_CONFIG=false`` and without the flat-only ``--no-warn-ignored`` (ESLint 8 and
older refuse it). Warnings are not offences (a project marks as warnings what it does not block
on); errors and files that do not parse are.
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.core.types import LintOffense
from tasks.toolchains.base import LINT_TIMEOUT_S, CommandRunner, ToolchainError
from tasks.toolchains.diagnose import relative_to_repo
from tasks.toolchains.node.tools import NodeTools
from tasks.toolchains.runs import relative_path, tail

FLAT_CONFIGS = tuple(f"eslint.config.{ext}" for ext in ("js", "mjs", "cjs", "ts", "mts", "cts"))
LEGACY_CONFIGS = tuple(f".eslintrc{ext}" for ext in ("", ".js", ".cjs", ".json", ".yaml", ".yml"))


def project_eslint_config(repo: Path) -> tuple[str, bool] | None:
    """The project's ESLint configuration (repository-relative) and whether it is a legacy
    eslintrc one, or None."""
    for name in FLAT_CONFIGS:
        if (repo / name).is_file():
            return name, False
    for name in LEGACY_CONFIGS:
        if (repo / name).is_file():
            return name, True
    try:
        package = json.loads((repo / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(package, dict) and "eslintConfig" in package:
        return "package.json", True
    return None


def eslint_argv(repo: Path, tools: NodeTools, files: list[str], autocorrect: bool) -> list[str]:
    """The ESLint command line for `files` (see the module docstring)."""
    found = project_eslint_config(repo)
    program = (
        tools.eslint if found is not None else str(tools.modules / "eslint" / "bin" / "eslint.js")
    )
    argv = [tools.node, program, "--format", "json"]
    if found is None or not found[1]:
        argv.append("--no-warn-ignored")  # flat configurations only
    if found is None:
        argv += ["--config", tools.default_eslint_config]
    if autocorrect:
        argv.append("--fix")
    return [*argv, "--", *files]


def lint(
    repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner, tools: NodeTools
) -> list[LintOffense]:
    """ESLint the given files (repository-relative); returns the errors that remain.

    Raises:
        ToolchainError: ESLint failed (exit 2: a configuration that does not load, a plugin
            that is not installed) or printed no JSON report.
    """
    if not files:
        return []
    found = project_eslint_config(repo)
    env = {"NODE_PATH": tools.node_path(), "FORCE_COLOR": "0", "NO_COLOR": "1"}
    if found is not None and found[1]:
        env["ESLINT_USE_FLAT_CONFIG"] = "false"
    argv = eslint_argv(repo, tools, files, autocorrect)
    cmd = runner.run(argv, cwd=repo, env=env, timeout_s=LINT_TIMEOUT_S)
    if cmd.reason or cmd.exit_code not in (0, 1):
        why = cmd.reason or _eslint_error(relative_to_repo(cmd.stderr or cmd.stdout, repo))
        where = f"the project's {found[0]}" if found else "Autopilot's default configuration"
        raise ToolchainError(f"eslint: {why or f'exit {cmd.exit_code}'} (with {where})")
    return parse_eslint_json(cmd.stdout, repo)


def _eslint_error(text: str) -> str:
    """ESLint's own account of a crash, in one line (the line after "Oops!", or the first
    line naming an error)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for index, line in enumerate(lines):
        if line.startswith("Oops!") and index + 1 < len(lines):
            following = [ln for ln in lines[index + 1 :] if not ln.startswith("ESLint:")]
            return following[0] if following else line
    return next((ln for ln in lines if "Error" in ln), lines[0] if lines else "")


def parse_eslint_json(text: str, repo: Path) -> list[LintOffense]:
    """Errors (severity 2, and files that do not parse) from ``eslint --format json``.

    Raises:
        ToolchainError: the output is not ESLint's JSON report.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, list):
        raise ToolchainError(f"eslint printed no JSON report: {tail(text, 300)!r}")
    offenses: list[LintOffense] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        path = relative_path(str(item.get("filePath", "")), repo)
        for msg in item.get("messages") or []:
            if not isinstance(msg, dict) or (msg.get("severity") != 2 and not msg.get("fatal")):
                continue
            offenses.append(
                LintOffense(
                    path=path,
                    line=int(msg.get("line") or 0),
                    column=int(msg.get("column") or 0),
                    rule=str(msg.get("ruleId") or "syntax-error"),
                    message=str(msg.get("message", "")),
                    correctable=msg.get("fix") is not None,
                )
            )
    return offenses
