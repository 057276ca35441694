"""Why a pytest run did not get to its tests, in one line."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tasks.core.secrets import redact
from tasks.core.types import SuiteProblem
from tasks.toolchains.diagnose import (
    Cause,
    detail_of,
    innermost_repo_frame,
    output_lines,
    relative_to_repo,
    squash,
)

_E_LINE = re.compile(
    r"^E\s+(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit)\b):?\s*(?P<msg>.*)$"
)
_MISSING_MODULE = re.compile(r"No module named '(?P<name>[\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(?P<what>[\w.]+)' from '(?P<mod>[\w.]+)'")


#: The plugins that register well-known ini options (the option, or its prefix with ``_``).
PLUGIN_OPTIONS = {
    "asyncio_": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "timeout_": "pytest-timeout",
    "session_timeout": "pytest-timeout",
    "mock_": "pytest-mock",
    "DJANGO_SETTINGS_MODULE": "pytest-django",
    "django_": "pytest-django",
    "FAIL_INVALID_TEMPLATE_VARS": "pytest-django",
    "env": "pytest-env",
    "env_files": "pytest-dotenv",
    "trio_": "pytest-trio",
    "qt_": "pytest-qt",
    "bdd_": "pytest-bdd",
    "rsyncdirs": "pytest-xdist",
    "rsyncignore": "pytest-xdist",
    "looponfailroots": "pytest-xdist",
    "flakes-ignore": "pytest-flakes",
    "render_collapsed": "pytest-html",
    "describe_prefixes": "pytest-describe",
    "doctest_plus": "pytest-doctestplus",
    "doctest_rst": "pytest-doctestplus",
    "xvfb_": "pytest-xvfb",
}
_UNKNOWN_OPTION = re.compile(r"Unknown config option: (?P<option>[\w.-]+)")


def plugin_of_option(option: str) -> str | None:
    """The plugin that registers the ini option `option`, when it is a well-known one."""
    if option in PLUGIN_OPTIONS:
        return PLUGIN_OPTIONS[option]
    return next(
        (p for k, p in PLUGIN_OPTIONS.items() if k.endswith("_") and option.startswith(k)), None
    )


def _unknown_option(text: str, exit_code: int, python: str, detail: str) -> SuiteProblem | None:
    """pytest stopped on an ini option no installed plugin registers (``--strict-config``,
    or ``filterwarnings = error`` turning the warning into an internal error): the plugin
    that provides it is missing."""
    found = _UNKNOWN_OPTION.search(text)
    if found is None or exit_code not in (3, 4):
        return None
    option = found.group("option")
    plugin = plugin_of_option(option)
    where = (
        "add it to the project's test dependencies (a dependency group or requirements file "
        "named for tests), or set `python` in autopilot.toml to an interpreter that has it"
    )
    hint = (
        f"{option} is an option of {plugin}, which {python} lacks: {where}"
        if plugin
        else f"no plugin installed in {python} registers {option}: the plugin that provides "
        f"it is missing; {where}"
    )
    return SuiteProblem(
        tool="pytest",
        cause="environment",
        message=f"Unknown config option: {option}",
        hint=hint,
        detail=detail,
    )


def _tooling_problem(text: str, exit_code: int, python: str, detail: str) -> SuiteProblem | None:
    """A usage error (a plugin the configuration needs is missing) or pytest or coverage missing
    from the interpreter: the environment's problem, before any test file is read."""
    unknown = _unknown_option(text, exit_code, python, detail)
    if unknown is not None:
        return unknown
    usage = re.search(r"error: (unrecognized arguments: .*|argument .*|.*option.*)", text)
    if exit_code == 4 and usage and "conftest" not in text.split(usage.group(0))[0][-300:]:
        return SuiteProblem(
            tool="pytest",
            cause="environment",
            message=usage.group(1).strip(),
            hint=f"a plugin the project's pytest configuration needs is missing from {python}: "
            "set `python` in autopilot.toml to the project's interpreter, or install the "
            "plugin there",
            detail=detail,
        )
    missing_tool = re.search(r"No module named (?:'?)(pytest|coverage)\b", text)
    if missing_tool and "E   " not in text:
        return SuiteProblem(
            tool="python",
            cause="environment",
            message=f"{python}: No module named {missing_tool.group(1)}",
            hint=f"install {missing_tool.group(1)} in that environment",
            detail=detail,
        )
    return None


def _import_cause(message: str, packages: Iterable[str], python: str) -> tuple[Cause, str | None]:
    """Whose problem an import error is: the project's when the module is one of its packages,
    else the environment's (with a hint on where it is missing)."""
    missing = _MISSING_MODULE.search(message)
    cannot = _CANNOT_IMPORT.search(message)
    named = missing.group("name") if missing else cannot.group("mod") if cannot else ""
    top = named.split(".", 1)[0]
    if top and top in set(packages):
        return "project", None
    hint = (
        f"{top} is not importable by {python}: set `python` in autopilot.toml to the project's "
        "interpreter, or install it there"
        if top
        else None
    )
    return "environment", hint


def diagnose_pytest(
    output: str, exit_code: int, repo: Path, packages: Iterable[str] = (), python: str = "python"
) -> SuiteProblem:
    """The problem behind a pytest run that did not get to its tests.

    Args:
        output: the run's stdout and stderr.
        exit_code: pytest's exit status (2 interrupted, 3 internal error, 4 usage error...).
        repo: the project directory (frames inside it are the project's).
        packages: the project's top-level packages (a missing one is the project's problem).
        python: the interpreter that ran the tests, for hints.
    """
    lines = output_lines(output)
    detail = detail_of(output, repo)
    file, line = innermost_repo_frame(output, repo)
    early = _tooling_problem(redact(output), exit_code, python, detail)
    if early is not None:
        return early
    header = next(
        (
            ln.strip()
            for ln in lines
            if ln.startswith(("ImportError while loading conftest", "ERROR collecting"))
            or ln.startswith(("INTERNALERROR>", "ImportError while importing test module"))
        ),
        None,
    )
    error = None
    for ln in lines:
        m = _E_LINE.match(ln)
        if m:
            error = m
    error_type = error.group("type").rsplit(".", 1)[-1] if error else None
    message = f"{error.group('type')}: {error.group('msg')}".strip() if error else None
    if error is None and header and header.startswith("INTERNALERROR>"):
        internal = [ln for ln in lines if ln.startswith("INTERNALERROR>")]
        message = internal[-1].removeprefix("INTERNALERROR>").strip() if internal else header
        error_type = (message.split(":", 1)[0] or None) if message else None
    cause: Cause = "project" if error_type and file is not None else "environment"
    hint: str | None = None
    if error_type in ("ModuleNotFoundError", "ImportError") and message:
        cause, hint = _import_cause(message, packages, python)
    if message is None:
        errors = [ln.removeprefix("ERROR: ").strip() for ln in lines if ln.startswith("ERROR: ")]
        message = header or (errors[0] if errors else None)
        message = message or f"pytest exited {exit_code} before running the tests"
    elif header and not header.startswith("INTERNALERROR>"):
        message = f"{header.rstrip('.')}: {message}"
    return SuiteProblem(
        tool="pytest",
        cause=cause,
        message=squash(relative_to_repo(message, repo)),
        hint=hint,
        error_type=error_type,
        file=file,
        line=line,
        detail=detail,
    )
