"""The CLI's set-up: logging to stderr at the verbosity asked, ``--version``, and the
verbosity flags accepted anywhere before ``--``."""

from __future__ import annotations

import logging
import re
import sys

import typer


def _setup_logging(verbose: int) -> None:
    """-v: our progress (INFO); -vv: debug, with the HTTP clients' requests; -vvv: all."""
    from flows.commands.render import LOG_DATEFMT, LOG_FORMAT

    logging.basicConfig(
        level=logging.DEBUG if verbose >= 2 else logging.INFO if verbose else logging.WARNING,
        format=LOG_FORMAT,
        datefmt=LOG_DATEFMT,
        stream=sys.stderr,
    )
    from flows.runtime import quiet_transport_loggers

    quiet_transport_loggers(verbose)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("test-autopilot")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        print(f"autopilot {number}")
        raise typer.Exit(0)


#: The verbosity flags, accepted anywhere before ``--`` (moved before the command).
_VERBOSE = re.compile(r"-v+|--verbose")


def hoist_verbose(args: list[str]) -> list[str]:
    """`args` with every -v, -vv... or --verbose moved to the front, where the root option
    is read: ``autopilot nightly --repo . -v`` then means ``autopilot -v nightly --repo .``."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if _VERBOSE.fullmatch(a)]
    return flags + [a for a in args[:end] if not _VERBOSE.fullmatch(a)] + args[end:]
