"""The retry table, the backoff shape and the shared concurrency limit."""

from __future__ import annotations

import threading

import httpx2
import pytest
from mistralai.client import errors

from tasks.model import transport as transport


def _sdk_exception_classes() -> list[type[BaseException]]:
    classes = [getattr(errors, name) for name in errors.__all__]
    return [c for c in classes if isinstance(c, type) and issubclass(c, BaseException)]


def test_every_sdk_error_class_is_classified() -> None:
    # Fails when mistralai grows an exception class nobody decided about (aider's test).
    classes = _sdk_exception_classes()
    assert errors.SDKError in classes  # the introspection itself works
    unlisted = [c.__name__ for c in classes if c not in transport.RETRYABLE]
    assert unlisted == []


def test_every_httpx2_transport_error_resolves_to_a_row() -> None:
    for name in dir(httpx2):
        cls = getattr(httpx2, name)
        if isinstance(cls, type) and issubclass(cls, httpx2.HTTPError):
            transport.classify(cls.__new__(cls))  # raises KeyError when unclassified


def _response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return httpx2.Response(status, headers=headers, text='{"m": 1}', request=request)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (400, False),
        (401, False),
        (404, False),
        (501, False),
    ],
)
def test_sdk_errors_retry_by_status(status: int, retry: bool) -> None:
    exc = errors.SDKError("API error occurred", _response(status))
    assert transport.is_retryable(exc) is retry


def test_transport_errors() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/")
    assert transport.is_retryable(httpx2.ReadTimeout("slow", request=request))
    assert transport.is_retryable(httpx2.ConnectError("refused", request=request))
    assert transport.is_retryable(httpx2.RemoteProtocolError("cut", request=request))
    assert transport.is_retryable(errors.NoResponseError())
    assert not transport.is_retryable(httpx2.UnsupportedProtocol("ftp", request=request))
    assert not transport.is_retryable(transport.AttemptsExhaustedError("6 attempts"))
    assert not transport.is_retryable(ValueError("a bug"))


def test_retry_after_headers() -> None:
    assert transport.retry_after_s(errors.SDKError("", _response(429, {"Retry-After": "2"}))) == 2
    ms = errors.SDKError("", _response(429, {"retry-after-ms": "1500"}))
    assert transport.retry_after_s(ms) == 1.5
    assert transport.retry_after_s(errors.SDKError("", _response(503))) is None


def test_describe_is_one_line() -> None:
    exc = errors.SDKError("API error", _response(500))
    assert transport.describe(exc) == 'HTTP 500: {"m": 1}'
    request = httpx2.Request("POST", "http://127.0.0.1/")
    assert transport.describe(httpx2.ReadTimeout("x", request=request)).startswith("timed out")


def test_backoff_grows_and_is_capped() -> None:
    backoff = transport.Backoff(initial_ms=100, max_ms=1000, exponent=2.0, jitter_ms=0)
    assert [backoff.delay_s(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_concurrency_limit_is_shared_and_resized() -> None:
    first = transport.concurrency_limit(3)
    assert transport.concurrency_limit(3) is first
    resized = transport.concurrency_limit(4)
    assert resized is not first
    assert isinstance(resized, type(threading.BoundedSemaphore(1)))
