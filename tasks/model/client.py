"""The model client: Mistral chat completions for every role, with retries, re-asks and records.

Every request carries the repository-relative path of the file it is about: when no message
mentions it, "File: <path>" is appended to the system message (or a system message holding it is
put first). Every outgoing message goes through :func:`tasks.core.secrets.redact`.

Two retry layers (SWE-agent style): transport errors retry with backoff under a per-call attempt
budget (see :mod:`tasks.model.transport`); a reply that breaks its format goes back to the model
with the parse error as a new user message, at most ``max_reasks`` times.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mistralai.client import Mistral, RetryConfig
from mistralai.client.utils import BackoffStrategy
from mistralai.extra.utils import response_format_from_pydantic_model
from pydantic import BaseModel

from tasks.core.config import Settings
from tasks.core.errors import ConfigError, ModelError, ReplyFormatError
from tasks.core.secret_values import register_secret
from tasks.core.secrets import redact
from tasks.core.types import PromptMeta
from tasks.model import sdk_speed, send
from tasks.model import transport as transport
from tasks.model.messages import (
    ROLES,
    CallRecord,
    Message,
    PromptInfo,
    Reply,
    Role,
    prepare_messages,
)
from tasks.model.replies import parse_diff_reply, parse_files_reply, parse_json_reply
from tasks.model.reply_store import ReplyStore, StoredReply, request_digest

__all__ = [
    "CallRecord",
    "Message",
    "ModelClient",
    "PromptInfo",
    "PromptMeta",
    "Reply",
    "Role",
    "parse_diff_reply",
    "parse_files_reply",
    "parse_json_reply",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

REASK = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with the complete answer in the required format, and nothing else."
)


def _server_url(url: str | None) -> str | None:
    # The SDK appends /v1/chat/completions itself; people paste URLs ending in /v1.
    if url is None:
        return None
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ModelClient:
    """Chat completions for the pipeline's roles. Thread-safe; share one per process."""

    def __init__(
        self,
        *,
        models: dict[str, str],
        api_key: str | None = None,
        server_url: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        max_reasks: int = 2,
        max_concurrency: int = 8,
        temperature: float = 0.0,
        max_tokens: int = 8192,
        backoff: transport.Backoff | None = None,
        shared_limit: str | None = None,
        reply_store: ReplyStore | None = None,
    ) -> None:
        """Build a client; most callers want :meth:`from_settings`.

        Args:
            models: model name per role; "scout" falls back to "diagnostician".
            api_key: the Mistral API key (None for self-hosted servers without auth).
            server_url: the SDK's server_url (a trailing /v1 is dropped).
            timeout_s: per-request timeout.
            max_retries: transport retries per call (attempts = max_retries + 1).
            max_reasks: re-asks when a reply breaks its format.
            max_concurrency: size of the process-wide limit on calls in flight.
            temperature: sampling temperature.
            max_tokens: reply length limit.
            backoff: backoff shape for transport retries.
            shared_limit: a Prefect global concurrency limit each call also takes a slot of,
                so processes on several machines (Dask workers) share one limit.
            reply_store: where every reply is kept before it is used, and answered from when
                the same request comes again (:mod:`tasks.model.reply_store`); None: never.
        """
        missing = [r for r in ROLES if r != "scout" and r not in models]
        if missing:
            raise ConfigError(f"no model configured for role {missing[0]}")
        self._models = dict(models)
        self._models.setdefault("scout", self._models["diagnostician"])
        register_secret(api_key)  # the key never leaves in a prompt, in any form
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_reasks = max_reasks
        self.max_concurrency = max_concurrency
        self.shared_limit = shared_limit
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff = backoff or transport.Backoff()
        self.reply_store = reply_store
        self._send_limits = send.Limits(
            temperature=temperature,
            max_tokens=max_tokens,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            shared_limit=shared_limit,
            backoff=self.backoff,
        )
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        timeout_ms = int(timeout_s * 1000)
        retry = RetryConfig(
            "backoff",
            BackoffStrategy(
                self.backoff.initial_ms,
                self.backoff.max_ms,
                self.backoff.exponent,
                # The attempt budget is the real bound; this only stops a runaway loop.
                (max_retries + 1) * (timeout_ms + self.backoff.max_ms) + 60_000,
                jitter_ms=self.backoff.jitter_ms,
            ),
            retry_connection_errors=True,
            status_codes_override=[str(code) for code in transport.RETRY_STATUSES],
        )
        sdk_speed.install()  # one serializer class per type, not one per call
        self._sdk = Mistral(
            api_key=api_key,
            server_url=_server_url(server_url),
            client=transport.CountingHttpClient(follow_redirects=True),
            retry_config=retry,
            timeout_ms=timeout_ms,
        )

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> ModelClient:
        """A client from Settings (key, URL, per-role models, model.* limits).

        Raises:
            ConfigError: neither MISTRAL_API_KEY nor AUTOPILOT_MODEL_URL is set.
        """
        if not settings.model_configured:
            raise ConfigError("no model configured: set MISTRAL_API_KEY or AUTOPILOT_MODEL_URL")
        key = settings.mistral_api_key.get_secret_value() if settings.mistral_api_key else None
        names = settings.models.model_dump()
        m = settings.model
        store = ReplyStore.under(settings.cache_root) if m.reuse_replies else None
        kwargs.setdefault("reply_store", store)
        return cls(
            models={k: v for k, v in names.items() if isinstance(v, str)},
            api_key=key,
            server_url=settings.model_url,
            timeout_s=m.timeout_s,
            max_retries=m.max_retries,
            max_reasks=m.max_reasks,
            max_concurrency=m.max_concurrency,
            temperature=m.temperature,
            max_tokens=m.max_tokens,
            shared_limit=m.shared_limit,
            **kwargs,
        )

    def model_for(self, role: Role) -> str:
        """The model name used for `role`."""
        return self._models[role]

    @property
    def records(self) -> list[CallRecord]:
        """A snapshot of every call's record, in completion order."""
        with self._lock:
            return list(self._records)

    @property
    def calls(self) -> int:
        """Logical calls that sent a request (each may have several attempts and re-asks); a
        call answered wholly from the reply store sent none and is not counted."""
        with self._lock:
            return sum(1 for r in self._records if r.attempts or r.error)

    @property
    def tokens(self) -> int:
        """Input plus output tokens over every call."""
        with self._lock:
            return sum(r.input_tokens + r.output_tokens for r in self._records)

    def adopt_records(self, records: list[CallRecord]) -> None:
        """Count calls another process made for this run (a worker's client) as this one's."""
        with self._lock:
            self._records.extend(records)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._sdk.sdk_configuration.client.close()  # type: ignore[union-attr]

    def complete(
        self,
        role: Role,
        messages: Sequence[dict[str, Any] | Message],
        *,
        prompt: PromptInfo,
        about: str,
    ) -> Reply:
        """A free-text reply.

        Raises:
            ModelError: transport failed after retries (status, role and model in the message).
        """
        text, record = self._ask(role, messages, lambda t: t, prompt=prompt, about=about)
        return Reply(text=text, record=record)

    def structured(
        self,
        role: Role,
        messages: Sequence[dict[str, Any] | Message],
        schema: type[M],
        *,
        schema_name: str,
        prompt: PromptInfo,
        about: str,
        replies: list[str] | None = None,
    ) -> tuple[M, CallRecord]:
        """A reply validated against `schema`, requested as a strict JSON schema `schema_name`.

        The request carries ``{"type": "json_schema", "json_schema": {"name": schema_name,
        "schema": <schema's JSON schema, additionalProperties false>, "strict": true}}``.

        Fenced JSON is accepted; invalid JSON or a schema mismatch is re-asked with the error.
        With `replies`, every raw reply text (re-asked ones included) is appended to it.

        Raises:
            ReplyFormatError: still malformed after max_reasks re-asks.
            ModelError: transport failed after retries.
        """
        # The SDK's own strict form of the schema (additionalProperties: false on every object),
        # as chat.parse sends it, but under the protocol's name rather than the class name.
        response_format: dict[str, Any] = dict(response_format_from_pydantic_model(schema))
        response_format["json_schema"] = {**response_format["json_schema"], "name": schema_name}
        return self._ask(
            role,
            messages,
            lambda text: parse_json_reply(text, schema),
            prompt=prompt,
            about=about,
            response_format=response_format,
            replies=replies,
        )

    def complete_parsed(
        self,
        role: Role,
        messages: Sequence[dict[str, Any] | Message],
        parser: Callable[[str], T],
        *,
        prompt: PromptInfo,
        about: str,
        replies: list[str] | None = None,
    ) -> tuple[T, CallRecord]:
        """A free-text reply run through `parser` (e.g. parse_files_reply), re-asked on failure.

        `parser` signals a bad reply by raising ReplyFormatError; its message goes to the model.
        With `replies`, every raw reply text (re-asked ones included) is appended to it.

        Raises:
            ReplyFormatError: still malformed after max_reasks re-asks.
            ModelError: transport failed after retries.
        """
        return self._ask(role, messages, parser, prompt=prompt, about=about, replies=replies)

    # -- internals -------------------------------------------------------------------------

    def _ask(
        self,
        role: Role,
        messages: Sequence[dict[str, Any] | Message],
        parser: Callable[[str], T],
        *,
        prompt: PromptInfo,
        about: str,
        response_format: dict[str, Any] | None = None,
        replies: list[str] | None = None,
    ) -> tuple[T, CallRecord]:
        if role not in self._models:
            raise ModelError(f"unknown model role {role!r}")
        model = self._models[role]
        record = CallRecord(
            role=role,
            model=model,
            prompt_name=prompt.name,
            prompt_version=prompt.version,
            prompt_sha256=prompt.sha256,
            about=about,
        )
        outgoing = prepare_messages(messages, about)
        started = time.monotonic()
        try:
            while True:
                text = self._send(record, outgoing, response_format)
                if replies is not None:  # every raw reply, re-asked ones included (archive)
                    replies.append(text)
                try:
                    value = parser(text)
                except ReplyFormatError as exc:
                    if record.reasks >= self.max_reasks:
                        raise ReplyFormatError(
                            f"{about}: {role} reply ({model}) still malformed after "
                            f"{record.reasks} re-asks: {exc}"
                        ) from None
                    record.reasks += 1
                    log.info("%s: re-asking %s (%s): %s", about, role, model, exc)
                    outgoing += [
                        {"role": "assistant", "content": redact(text)},
                        {"role": "user", "content": redact(REASK.format(error=exc))},
                    ]
                    continue
                record.ok = True
                return value, record
        except ModelError as exc:
            record.error = str(exc)
            raise
        finally:
            record.latency_s = time.monotonic() - started
            with self._lock:
                self._records.append(record)

    def _send(
        self,
        record: CallRecord,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
    ) -> str:
        """One completion (with transport retries); updates the record's attempts and tokens.

        With a reply store, a reply an earlier run received for this very request (and this
        occurrence of it) is answered from disk, and a new one is kept before it is used."""
        key = None
        if self.reply_store is not None:
            digest = request_digest(
                record.model,
                messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                response_format=response_format,
            )
            key = self.reply_store.next_key(digest)
            kept = self.reply_store.get(key)
            if kept is not None:
                record.replayed += 1
                log.info("%s: %s reply re-used (received before)", record.about, record.role)
                return kept.text
        text, usage = send.complete_once(
            self._sdk, record, messages, response_format, self._send_limits
        )
        if key is not None and self.reply_store is not None:
            stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            kept = StoredReply(
                text=text,
                model=record.model,
                role=record.role,
                about=record.about,
                input_tokens=usage[0],
                output_tokens=usage[1],
                created_at=stamp,
            )
            self.reply_store.put(key, kept)
        return text
