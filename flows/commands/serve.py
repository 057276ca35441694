"""`autopilot serve`: serve nightly (cron), post-merge, premerge and audit here until Ctrl-C.

For one machine without a work pool. Flow runs execute here; `PREFECT_API_URL` names the server
(the deployments need a real one: an ephemeral server dies with the process). Bad options are one
line on stderr (exit 2) before anything is registered.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from tasks.core.errors import AutopilotError, BadInputError


def check_inputs(cron: str, timezone: str, repo: str | None, limit: int | None) -> None:
    """Raise BadInputError for a cron string, timezone, repository or limit that cannot work."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from prefect.schedules import validate_cron_string

    try:
        validate_cron_string(cron)
    except ValueError as exc:
        raise BadInputError(f"--cron: {cron!r} is not a valid cron string ({exc})") from None
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInputError(f"--timezone: {timezone!r} is not a known IANA timezone") from None
    if repo is not None and not Path(repo).is_dir():
        raise BadInputError(f"--repo: {repo}: not a directory")
    if limit is not None and limit < 1:
        raise BadInputError(f"--limit: {limit} is less than 1")


def run(
    cron: str = "0 2 * * *",
    timezone: str = "UTC",
    repo: str | None = None,
    ref: str = "HEAD",
    archive: str | None = None,
    max_files: int | None = None,
    max_model_calls: int | None = None,
    limit: int | None = None,
    verbose: bool | int = False,
) -> int:
    """Register the four deployments and serve their runs until interrupted.

    Args:
        cron: the nightly's cron schedule (default 02:00).
        timezone: IANA timezone of the cron schedule.
        repo: the repository the nightly works on; None registers the schedule inactive.
        ref: the nightly's starting ref.
        archive: archive URI passed to the nightly (default: settings).
        max_files: the nightly's file limit.
        max_model_calls: the nightly's model-call budget.
        limit: at most this many flow runs at once.
        verbose: log at INFO.

    Returns:
        0 after Ctrl-C / SIGTERM; 2 bad input or configuration (one line on stderr).
    """
    import logging
    import os

    try:
        check_inputs(cron, timezone, repo, limit)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.serve import ServeOptions, serve_flows

    opts = ServeOptions(
        cron=cron,
        timezone=timezone,
        repo=str(Path(repo).resolve()) if repo else None,
        ref=ref,
        archive=archive,
        max_files=max_files,
        max_model_calls=max_model_calls,
    )
    print(
        f"autopilot: serving nightly ({cron}, {timezone}), post-merge and audit; Ctrl-C stops",
        file=sys.stderr,
    )
    # Ctrl-C is how a served process is meant to end, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        serve_flows(opts, limit=limit)
    return 0
