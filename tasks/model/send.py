"""One request to the model with transport retries: the SDK call under the concurrency limits,
retried with backoff on what :mod:`tasks.model.transport` says is retryable, within the call's
attempt budget; its text and tokens.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, cast

from mistralai.client import Mistral, models

from tasks.core.errors import ModelError, ReplyFormatError
from tasks.model import transport
from tasks.model.messages import CallRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """The request's parameters and the bounds on its retries."""

    temperature: float
    max_tokens: int
    max_retries: int
    max_concurrency: int
    shared_limit: str | None
    backoff: transport.Backoff


def complete_once(
    sdk: Mistral,
    record: CallRecord,
    messages: list[dict[str, str]],
    response_format: dict[str, Any] | None,
    limits: Limits,
) -> tuple[str, tuple[int, int]]:
    """One request to the model, with transport retries: its text and (in, out) tokens."""
    budget = transport.begin_call(limits.max_retries + 1, f"{record.about}: {record.role}")
    retries = 0
    try:
        while True:
            try:
                with (
                    transport.concurrency_limit(limits.max_concurrency),
                    transport.shared_slot(limits.shared_limit),
                ):
                    res = sdk.chat.complete(
                        model=record.model,
                        messages=cast(Any, messages),
                        temperature=limits.temperature,
                        max_tokens=limits.max_tokens,
                        response_format=cast(Any, response_format),
                    )
                break
            except Exception as exc:
                try:
                    transport.classify(exc)
                except KeyError:
                    raise  # not a transport error: a bug, let it surface
                status = transport.status_of(exc)
                if status in transport.AUTH_STATUSES:
                    raise ModelError(
                        f"authentication failed (HTTP {status}) for role {record.role} "
                        f"(model {record.model}): check MISTRAL_API_KEY"
                    ) from None
                exhausted = budget.attempts >= budget.max_attempts
                if not transport.is_retryable(exc) or exhausted:
                    what = budget.last_failure if exhausted else transport.describe(exc)
                    raise ModelError(
                        f"model call failed for role {record.role} (model {record.model}) "
                        f"after {budget.attempts} attempts: {what or transport.describe(exc)}"
                    ) from None
                delay = transport.retry_after_s(exc)
                delay = limits.backoff.delay_s(retries) if delay is None else delay
                log.warning(
                    "%s: %s retrying in %.1fs: %s",
                    record.about,
                    record.role,
                    delay,
                    transport.describe(exc),
                )
                retries += 1
                time.sleep(delay)
    finally:
        record.attempts += budget.attempts
        transport.end_call()
    usage = (0, 0)
    if res.usage is not None:
        usage = (res.usage.prompt_tokens or 0, res.usage.completion_tokens or 0)
        record.input_tokens += usage[0]
        record.output_tokens += usage[1]
    if not res.choices:
        raise ReplyFormatError(f"{record.about}: {record.role} reply has no choices")
    message = res.choices[0].message
    return _text_of(message.content if message is not None else None), usage


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # A list of content chunks: keep the text ones (thinking/reference chunks are not the answer).
    return "".join(c.text for c in content if isinstance(c, models.TextChunk))
