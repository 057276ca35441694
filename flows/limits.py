"""What Prefect is told about the per-file and per-group tasks: their time limit and when a
failure is worth a retry.

A task's time limit is its sandbox time plus its model time, so a hung file is stopped and
reported while the nightly goes on. Retries are for the infrastructure only (a lost connection,
a crashed worker): a gate failure is an outcome, not an exception, and is never retried; nor is
a task stopped at its time limit (it would hang again).
"""

from __future__ import annotations

import math
from typing import Any

from tasks.core.config import Settings

#: Retries of a task whose infrastructure failed, and the wait before each.
INFRA_RETRIES = 2
INFRA_RETRY_DELAY_S = 10
#: Exceptions of the machinery, by name (some live in packages only a cluster installs).
_INFRA_NAMES = {"KilledWorker", "CommClosedError", "StreamClosedError", "WorkerLost"}


def file_time_limit(settings: Settings, max_iterations: int, given_s: float | None = None) -> float:
    """Seconds one file's task may take before Prefect stops it: `given_s`
    (``--file-time-limit``) when set, else per round a sandbox run and a model call, then the
    flakiness re-runs and the judge's samples."""
    if given_s is not None:
        return float(given_s)
    sandbox, model = settings.sandbox.timeout_s, settings.model.timeout_s
    rounds = max(1, max_iterations) * (sandbox + model)
    gates = (settings.gates.flaky_runs + 1) * sandbox + settings.model.judge_samples * model
    return float(math.ceil(rounds + gates))


def group_time_limit(settings: Settings) -> float:
    """Seconds one failure group's repair may take: per revision a diagnosis and a patch from
    the model and the review's sandbox runs (the failing and the neighbouring tests)."""
    per_try = 2 * settings.model.timeout_s + 2 * settings.sandbox.timeout_s
    return float(math.ceil((settings.repair.max_retries + 1) * per_try))


def is_infrastructure_failure(exc: BaseException) -> bool:
    """A failure of the machinery around the work, worth running the task again."""
    if isinstance(exc, TimeoutError):  # includes the task's own time limit: never retried
        return False
    if isinstance(exc, ConnectionError | EOFError):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _INFRA_NAMES:
        return True
    # httpx's transport errors (a lost connection to the Prefect API or an object store).
    return "TransportError" in names and "TimeoutException" not in names


def retry_on_infrastructure(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry only when the failure is the infrastructure's."""
    data = getattr(state, "data", None)
    return isinstance(data, BaseException) and is_infrastructure_failure(data)


def task_options(limit_s: float) -> dict[str, Any]:
    """``Task.with_options`` arguments: the time limit and the infrastructure-only retries."""
    return {
        "timeout_seconds": limit_s,
        "retries": INFRA_RETRIES,
        "retry_delay_seconds": INFRA_RETRY_DELAY_S,
        "retry_condition_fn": retry_on_infrastructure,
    }
