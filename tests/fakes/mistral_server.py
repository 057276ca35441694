"""A real HTTP server on 127.0.0.1 that speaks Mistral's chat completions API from a script.

Tests drive the real SDK (its retries, timeouts and JSON parsing included) against it::

    server.add(Rule(replies=['{"score": 1}'], schema_name="judge_verdict"))
    server.add(Rule(replies=[error(429, retry_after=1), "ok"], about="app/models/user.rb"))

Rules are tried in order; the first whose predicates all hold answers. A rule's replies are
served in order and the last one repeats. A reply is a string (the assistant's content), a
:class:`Canned` answer (status, Retry-After, delay, malformed or truncated body), or a function
of the request returning either. Unmatched requests get a 500 with a clear body and are kept in
``server.unmatched``. Every request is kept in ``server.requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Canned:
    """One scripted HTTP answer."""

    content: str = ""
    status: int = 200
    retry_after: float | None = None
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent as is (malformed JSON)
    truncate: bool = False  # promise the full body, send half, close the connection
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def ok(content: str, **kwargs: Any) -> Canned:
    """A normal completion whose assistant message is `content`."""
    return Canned(content=content, **kwargs)


def error(status: int, retry_after: float | None = None, body: str | None = None) -> Canned:
    """An HTTP error, optionally with Retry-After (seconds)."""
    text = body if body is not None else json.dumps({"object": "error", "message": f"{status}"})
    return Canned(status=status, retry_after=retry_after, raw_body=text.encode())


def slow(seconds: float, content: str = "slow reply") -> Canned:
    """A completion sent after `seconds` (to trip the client's timeout)."""
    return Canned(content=content, delay_s=seconds)


def malformed() -> Canned:
    """A 200 whose body is not JSON."""
    return Canned(raw_body=b'{"id": "cmpl-1", "choices": [ this is not json')


def truncated(content: str = "cut short") -> Canned:
    """A 200 whose body stops halfway (Content-Length larger than what is sent)."""
    return Canned(content=content, truncate=True)


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    raw: bytes
    body: dict[str, Any] | None
    rule: str | None = None
    #: The client's (host, port): which process sent it (a test that kills that process).
    peer: tuple[str, int] = ("", 0)

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def text(self) -> str:
        """All message contents joined: what substring predicates look at."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)

    @property
    def schema_name(self) -> str | None:
        fmt = (self.body or {}).get("response_format") or {}
        return (fmt.get("json_schema") or {}).get("name")


Answer = str | Canned | Callable[[RecordedRequest], "str | Canned"]


@dataclass
class Rule:
    """Predicates on a request, and the replies to serve when they all hold."""

    replies: list[Answer]
    name: str = ""
    model: str | None = None
    contains: str | None = None
    about: str | None = None  # the repository path the request is about (appears in it)
    schema_name: str | None = None
    when: Callable[[RecordedRequest], bool] | None = None
    faults: list[Canned] = field(default_factory=list)  # served before the replies
    served: int = 0

    def matches(self, req: RecordedRequest) -> bool:
        """Whether every predicate of this rule holds for `req`."""
        text = req.text
        return (
            (self.model is None or req.model == self.model)
            and (self.contains is None or self.contains in text)
            and (self.about is None or self.about in text)
            and (self.schema_name is None or req.schema_name == self.schema_name)
            and (self.when is None or self.when(req))
        )

    def next_answer(self, req: RecordedRequest) -> Canned:
        """The next scripted answer (faults first; the last reply repeats)."""
        return answered(self.next_reply(), req)

    def next_reply(self) -> Answer:
        """The next scripted answer, a callable one not called yet (the server calls it
        without holding its lock: a reply that waits never stops the other requests)."""
        index = self.served
        self.served += 1
        if index < len(self.faults):
            return self.faults[index]
        if not self.replies:
            return error(500, body="rule has no replies")
        return self.replies[min(index - len(self.faults), len(self.replies) - 1)]


def answered(answer: Answer, req: RecordedRequest) -> Canned:
    """A scripted answer as the server sends it (a callable one called with `req`)."""
    if callable(answer) and not isinstance(answer, Canned):
        answer = answer(req)
    return ok(answer) if isinstance(answer, str) else answer


class MistralServer:
    """The scripted server. Start with :meth:`start` (or use it as a context manager)."""

    def __init__(self, rules: list[Rule] | None = None, latency_s: float = 0.0) -> None:
        self.rules: list[Rule] = list(rules or [])
        self.latency_s = latency_s
        self.requests: list[RecordedRequest] = []
        self.unmatched: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._faults: list[Canned] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for the SDK's server_url (no /v1)."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, rule: Rule) -> Rule:
        """Append a rule (tried after the existing ones) and return it."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def fail_next(self, *answers: Canned) -> None:
        """Serve these answers to the next requests, whatever rule would match."""
        with self._lock:
            self._faults.extend(answers)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> MistralServer:
        """Listen in a background thread (default: a free loopback port)."""
        handler = type("Handler", (_Handler,), {"fake": self})
        httpd = ThreadingHTTPServer((host, port), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # slow handlers must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> MistralServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer(self, req: RecordedRequest) -> Canned:
        with self._lock:
            self.requests.append(req)
            if self._faults:
                req.rule = "<fault>"
                return self._faults.pop(0)
            reply: Answer | None = None
            for index, rule in enumerate(self.rules):
                if rule.matches(req):
                    req.rule = rule.name or f"rule {index}"
                    reply = rule.next_reply()
                    break
            else:
                self.unmatched.append(req)
        if reply is not None:
            return answered(reply, req)
        preview = " ".join(req.text.split())[:200]
        return error(500, body=json.dumps({"error": f"no rule matches request: {preview}"}))


def completion_body(content: str, model: str, req: RecordedRequest, canned: Canned) -> bytes:
    """A chat completion body in Mistral's response shape."""
    prompt_tokens = canned.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = len(req.text) // 4 + 1
    completion_tokens = canned.completion_tokens
    if completion_tokens is None:
        completion_tokens = len(content) // 4 + 1
    doc = {
        "id": f"cmpl-{len(content)}-{time.monotonic_ns()}",
        "object": "chat.completion",
        "model": model,
        "created": int(time.time()),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": None},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json.dumps(doc).encode()


class _Handler(BaseHTTPRequestHandler):
    fake: MistralServer
    protocol_version = "HTTP/1.1"
    # Headers and body in one buffered write, no Nagle: otherwise each reply waits ~40 ms for a
    # delayed ACK, which adds up over a suite.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        req = RecordedRequest(self.path, dict(self.headers.items()), raw, body)
        req.peer = (str(self.client_address[0]), int(self.client_address[1]))
        fake = self.fake
        with fake._lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            if self.path != CHAT_PATH:
                canned = error(404, body=json.dumps({"error": f"no route {self.path}"}))
            else:
                canned = fake._answer(req)
            time.sleep(fake.latency_s + canned.delay_s)
            self._send(canned, req)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to do
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _send(self, canned: Canned, req: RecordedRequest) -> None:
        if canned.raw_body is not None:
            payload = canned.raw_body
        else:
            payload = completion_body(canned.content, req.model or "unknown", req, canned)
        self.send_response(canned.status)
        self.send_header("Content-Type", "application/json")
        if canned.retry_after is not None:
            self.send_header("Retry-After", f"{canned.retry_after:g}")
        self.send_header("Content-Length", str(len(payload)))
        if canned.truncate:
            self.send_header("Connection", "close")
        self.end_headers()
        if canned.truncate:
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)


@pytest.fixture
def mistral_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MistralServer]:
    """A started scripted server; AUTOPILOT_MODEL_URL and MISTRAL_API_KEY point at it."""
    server = MistralServer().start()
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", server.url)
    monkeypatch.setenv("MISTRAL_API_KEY", "test-key-not-real")
    try:
        yield server
    finally:
        server.stop()
