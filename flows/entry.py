"""The `autopilot` console script: a fast start for `parse`, the typer CLI for everything else.

`autopilot parse` runs in CI after every test run, so its start-up is part of what users wait
for; building the typer application (typer, click, rich, every command's signature) costs
several times the parse of a small report. The plain forms of `parse`, ``parse [--json]
REPORT...`` with no other option, are therefore run from here directly, with the same
logging, output, exit codes and one-line errors as through :mod:`flows.cli`. Every other
command line (``--help``, a root option such as ``-v``, an unknown option, no report) goes to
the typer application unchanged, so its errors and help text stay typer's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def fast_parse_args(args: list[str]) -> tuple[list[Path], bool] | None:
    """(reports, json_out) when ``args`` (after ``parse``) is a plain form, else None."""
    reports: list[Path] = []
    json_out = False
    for arg in args:
        if arg == "--json":
            json_out = True
        elif arg.startswith("-") or not arg:
            return None  # --help, --, another option, "-" or "": typer decides
        else:
            reports.append(Path(arg))
    return (reports, json_out) if reports else None


def _run_parse(reports: list[Path], json_out: bool) -> int:
    import logging

    from flows.commands.render import LOG_DATEFMT, LOG_FORMAT

    # As flows.cli's root callback does without -v.
    logging.basicConfig(
        level=logging.WARNING, format=LOG_FORMAT, datefmt=LOG_DATEFMT, stream=sys.stderr
    )
    from flows.commands.parse import run

    return run(reports, json_out)


def main() -> None:
    """Console-script entry: the fast `parse`, or the typer CLI (:func:`flows.cli.main`)."""
    argv = sys.argv[1:]
    fast = fast_parse_args(argv[1:]) if argv[:1] == ["parse"] else None
    if fast is None:
        from flows.cli import main as cli_main

        cli_main()
        return
    from tasks.core.errors import AutopilotError

    try:
        code = _run_parse(*fast)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("autopilot: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        # As click does: the reader went away (`| head`); end quietly with 1.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
