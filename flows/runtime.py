"""How the CLI runs a flow in-process: quiet, fast, and on the configured (or ephemeral) server."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.core.errors import BadInputError

if TYPE_CHECKING:
    from tasks.core.config import Settings

log = logging.getLogger(__name__)

#: HTTP clients: one line per request. Shown from -vv on.
HTTP_LIBRARIES = (
    "httpx",
    "httpcore",
    "httpx2",
    "urllib3",
    "botocore",
    "boto3",
    "s3transfer",
    "docker",
    "mistralai",
)
#: Internals of the machinery (ORM, event loop, plotting, git plumbing): shown from -vvv on.
NOISY_LIBRARIES = (
    "asyncio",
    "aiosqlite",
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "websockets",
    "distributed",
    "matplotlib",
    "graphviz",
    "PIL",
    "git",
    "psycopg",
)


def quiet_transport_loggers(verbose: int) -> None:
    """-v shows our progress; -vv adds the HTTP clients' requests; -vvv everything."""
    for names, shown_from in ((HTTP_LIBRARIES, 2), (NOISY_LIBRARIES, 3)):
        level = logging.DEBUG if verbose >= shown_from else logging.WARNING
        for name in names:
            logging.getLogger(name).setLevel(level)


@contextmanager
def flow_runtime(verbose: bool | int = False) -> Iterator[None]:
    """Settings for a flow run started from the CLI.

    The heartbeat thread costs ~1 s per run and is only useful to a worker; analytics would try
    the network. `PREFECT_API_URL`, when set, points the run at a real server; otherwise Prefect
    starts its ephemeral one.
    """
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The ephemeral server needs ~10 s on a quiet machine, far more on a busy CI runner.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_LOGGING_LEVEL,
        temporary_settings,
    )

    updates = {
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None,
        PREFECT_LOGGING_LEVEL: "INFO" if verbose else "WARNING",
    }
    with temporary_settings(updates=updates):
        level = logging.INFO if verbose else logging.WARNING
        for name in ("prefect", "prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).setLevel(level)
        # Prefect's logging set-up (on import) may have lowered them again.
        quiet_transport_loggers(int(verbose))
        task_runs = logging.getLogger("prefect.task_runs")
        task_runs.addFilter(_thread_timeout_notice)
        flow_runs = logging.getLogger("prefect.flow_runs")
        flow_runs.addFilter(_bad_input_traceback)
        try:
            yield
        finally:
            task_runs.removeFilter(_thread_timeout_notice)
            flow_runs.removeFilter(_bad_input_traceback)


def _bad_input_traceback(record: logging.LogRecord) -> bool:
    """Drop the engine's traceback of a flow that stopped on bad input (an unknown run to
    resume, no report that could be fetched): the command says it in one line, exit 2."""
    return not (record.exc_info and isinstance(record.exc_info[1], BadInputError))


def _thread_timeout_notice(record: logging.LogRecord) -> bool:
    """Drop Prefect's notice, once per task run, that a worker thread's timeout cannot interrupt
    a blocking call: the sandbox waits in short slices (tasks/sandbox/proc.py), so it does."""
    return not str(record.msg).startswith("Timeout of ")


SHARED_MODEL_LIMIT = "autopilot-model-calls"


def ensure_shared_model_limit(name: str, slots: int) -> int:
    """Make sure the Prefect global concurrency limit `name` exists; return its slot count.

    Created with `slots` when missing. An existing limit keeps the size an operator gave it
    (the Prefect UI's Concurrency page), so one limit can span several runs and machines.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            return client.read_global_concurrency_limit_by_name(name).limit
        except ObjectNotFound:
            pass
        try:
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=name, limit=slots)
            )
        except ObjectAlreadyExists:  # another run created it meanwhile
            return client.read_global_concurrency_limit_by_name(name).limit
    log.info("created the global concurrency limit %s with %d slots", name, slots)
    return slots


def with_shared_model_limit(settings: Settings, name: str | None) -> Settings:
    """The settings with `name` (or ``model.shared_limit``) as the model calls' shared limit,
    which exists on the server afterwards; unchanged when neither names one."""
    name = name or settings.model.shared_limit
    if not name or not settings.model_configured:
        return settings
    slots = ensure_shared_model_limit(name, settings.model.max_concurrency)
    log.info("model calls share the global concurrency limit %s (%d slots)", name, slots)
    model = settings.model.model_copy(update={"shared_limit": name})
    return settings.model_copy(update={"model": model})


#: Our loggers whose records belong in the Prefect run logs (the UI's Logs tab).
OUR_LOGGERS = ("tasks", "judge", "flows", "autopilot")


def collect_logs() -> None:
    """Send every record of our loggers made inside a flow or task run to the run's logs in
    Prefect, as ``PREFECT_LOGGING_EXTRA_LOGGERS`` would, but without depending on when Prefect
    was imported, and silently outside a run (the CLI's audit, parse, map). Idempotent; the
    flows call it when they start, so runs on a worker get it too."""
    for name in OUR_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, _run_log_handler_class()) for h in logger.handlers):
            logger.addHandler(_run_log_handler_class()())


_HANDLER: type[logging.Handler] | None = None


def _run_log_handler_class() -> type[logging.Handler]:
    """Prefect's API log handler, for records made inside a run only (built once, lazily)."""
    global _HANDLER
    if _HANDLER is None:
        from prefect.context import FlowRunContext, TaskRunContext
        from prefect.logging.handlers import APILogHandler

        class RunLogHandler(APILogHandler):
            def emit(self, record: logging.LogRecord) -> None:
                in_run = FlowRunContext.get() is not None or TaskRunContext.get() is not None
                if in_run or getattr(record, "flow_run_id", None):
                    super().emit(record)

        _HANDLER = RunLogHandler
    return _HANDLER
