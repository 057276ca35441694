"""Transport for model calls: which errors retry, a per-call attempt budget, the shared limit.

Two retry layers, one budget:

- the SDK's own ``RetryConfig`` (backoff, Retry-After honoured) retries 429/500/502/503/504,
  connection errors and timeouts inside one ``chat.complete`` call;
- :func:`tasks.model.client.ModelClient` wraps that call in its own loop for what the SDK
  leaves alone (a truncated body, a garbled JSON body, no response).

Both layers count against one per-call budget of ``max_retries + 1`` HTTP attempts, enforced by
:class:`CountingHttpClient`, because the SDK bounds its retries by elapsed time only.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mistralai.client import errors

log = logging.getLogger(__name__)

RETRY_STATUSES = (429, 500, 502, 503, 504)
AUTH_STATUSES = (401, 403)


class AttemptsExhaustedError(Exception):
    """The per-call HTTP attempt budget is spent; raised instead of sending one more request."""


# Which exceptions a model call retries. True/False: always/never; None: by HTTP status code
# (RETRY_STATUSES). Looked up along the exception's MRO, so subclasses inherit their base's row.
# tests/tasks/model/test_transport.py fails when mistralai.client.errors grows a class not listed
# here.
RETRYABLE: dict[type[BaseException], bool | None] = {
    errors.MistralError: None,
    errors.SDKError: None,
    errors.HTTPValidationError: False,  # 422: our request is wrong; sending it again won't help
    errors.ResponseValidationError: True,  # a 2xx whose body is not a chat completion
    errors.NoResponseError: True,
    errors.ObservabilityError: False,  # observability API only; never raised by chat
    httpx2.TimeoutException: True,
    httpx2.NetworkError: True,
    httpx2.RemoteProtocolError: True,  # connection closed mid-body (truncated response)
    httpx2.DecodingError: True,
    httpx2.LocalProtocolError: False,
    httpx2.ProxyError: False,
    httpx2.UnsupportedProtocol: False,
    httpx2.TooManyRedirects: False,
    httpx2.HTTPError: False,
    AttemptsExhaustedError: False,
}


def classify(exc: BaseException) -> bool | None:
    """The RETRYABLE row for `exc` (nearest class in its MRO); KeyError when none applies."""
    for cls in type(exc).__mro__:
        if cls in RETRYABLE:
            return RETRYABLE[cls]
    raise KeyError(type(exc).__name__)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error, or None for transport errors."""
    return exc.status_code if isinstance(exc, errors.MistralError) else None


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed model call should be tried again (unknown exceptions: no)."""
    try:
        row = classify(exc)
    except KeyError:
        return False
    if row is None:
        return status_of(exc) in RETRY_STATUSES
    return row


def retry_after_s(exc: BaseException) -> float | None:
    """The delay a 429/503 asked for (Retry-After seconds or retry-after-ms), if any."""
    if not isinstance(exc, errors.MistralError):
        return None
    headers = exc.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date: rare from model servers; fall back to our backoff
    return None


def describe(exc: BaseException | None) -> str:
    """One line describing a transport failure, for ModelError messages."""
    if exc is None:
        return "no response"
    if isinstance(exc, errors.MistralError):
        body = " ".join((exc.body or "").split())[:160]
        what = (
            "malformed response body, " if isinstance(exc, errors.ResponseValidationError) else ""
        )
        return f"{what}HTTP {exc.status_code}" + (f": {body}" if body else "")
    if isinstance(exc, httpx2.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class Backoff:
    """Backoff shape for both retry layers (milliseconds); tests shrink it."""

    initial_ms: int = 500
    max_ms: int = 30_000
    exponent: float = 2.0
    jitter_ms: int = 250

    def delay_s(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        base = min(self.max_ms, self.initial_ms * self.exponent**retry)
        return (base + random.uniform(0, self.jitter_ms)) / 1000


@dataclass
class CallBudget:
    """HTTP attempts of one logical call, and the last failure seen (for the error message)."""

    max_attempts: int
    attempts: int = 0
    last_failure: str | None = None
    statuses: list[int] = field(default_factory=list)
    #: What the call is about (the file, the group), for the retry warnings.
    about: str = ""

    def retrying(self) -> None:
        """Say that the attempt just failed and another follows (a warning the run logs keep)."""
        log.warning(
            "%s: model attempt %d of %d failed, retrying: %s",
            self.about or "model call",
            self.attempts,
            self.max_attempts,
            self.last_failure,
        )


_current = threading.local()


class CountingHttpClient(httpx2.Client):
    """An httpx2 client that charges every request to the calling thread's CallBudget.

    The SDK calls ``send`` once per attempt, including its own retries; raising here stops its
    retry loop at once (the SDK treats any non-transport exception as permanent), so the last
    attempt's retryable failure becomes AttemptsExhaustedError instead of one more backoff.
    """

    def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        """Send one attempt, or raise AttemptsExhaustedError when the budget is spent."""
        budget: CallBudget | None = getattr(_current, "budget", None)
        if budget is not None:
            if budget.attempts >= budget.max_attempts:
                raise AttemptsExhaustedError(f"{budget.attempts} attempts")
            budget.attempts += 1
        try:
            response = super().send(request, **kwargs)
        except Exception as exc:
            if budget is None:
                raise
            budget.last_failure = describe(exc)
            if budget.attempts >= budget.max_attempts and is_retryable(exc):
                # Stop now rather than let the SDK back off before an attempt we won't make.
                raise AttemptsExhaustedError(budget.last_failure) from exc
            if is_retryable(exc):
                budget.retrying()
            raise
        if budget is not None:
            budget.statuses.append(response.status_code)
            if response.status_code >= 400:
                budget.last_failure = _describe_response(response)
                last = budget.attempts >= budget.max_attempts
                if last and response.status_code in RETRY_STATUSES:
                    response.close()
                    raise AttemptsExhaustedError(budget.last_failure)
                if response.status_code in RETRY_STATUSES:
                    budget.retrying()
        return response


def _describe_response(response: httpx2.Response) -> str:
    try:
        body = " ".join(response.text.split())[:160]
    except httpx2.ResponseNotRead:
        body = ""
    return f"HTTP {response.status_code}" + (f": {body}" if body else "")


def begin_call(max_attempts: int, about: str = "") -> CallBudget:
    """Start charging this thread's requests to a fresh budget."""
    budget = CallBudget(max_attempts=max_attempts, about=about)
    _current.budget = budget
    return budget


def end_call() -> None:
    """Stop charging this thread's requests."""
    _current.budget = None


_limit_lock = threading.Lock()
_limit: threading.BoundedSemaphore | None = None
_limit_size = 0


def concurrency_limit(size: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore every model call acquires, created on first use.

    Asking for a different size replaces it (calls already holding the old one finish under it):
    the latest configuration wins rather than two limits coexisting silently.
    """
    global _limit, _limit_size
    with _limit_lock:
        if _limit is None or size != _limit_size:
            _limit = threading.BoundedSemaphore(size)
            _limit_size = size
        return _limit


@contextmanager
def shared_slot(name: str | None) -> Iterator[None]:
    """One slot of the Prefect global concurrency limit `name` for the duration of a call.

    The process-wide semaphore bounds one process; this bounds every process that names the
    same limit (Dask workers on several machines). Strict: a limit that does not exist is an
    error, never a silent "no limit". None: nothing to take.
    """
    if name is None:
        yield
        return
    from prefect.concurrency.sync import concurrency

    with concurrency(name, occupy=1, strict=True):
        yield
