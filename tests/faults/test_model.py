"""Model fault injection: a 429 storm hitting many parallel calls through the real SDK."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from tasks.core.config import load_settings
from tasks.model.client import ModelClient, PromptMeta
from tasks.model.transport import Backoff
from tests.fakes.mistral_server import Canned, MistralServer, RecordedRequest, Rule, error, ok
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

pytestmark = pytest.mark.slow

PROMPT = PromptMeta(name="generate", version="1", sha256="cd" * 32)
CALLS = 10
STORM = 3  # 429s each call receives before its success


def test_429_storm_every_parallel_call_succeeds_with_bounded_requests(
    mistral_server: MistralServer,
) -> None:
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def answer(req: RecordedRequest) -> Canned:
        about = next(a for a in (f"src/m{i}.py" for i in range(CALLS)) if a in req.text)
        with lock:
            seen[about] += 1
            n = seen[about]
        if n <= STORM:
            return error(429, retry_after=1)
        return ok(f"reply for {about}", prompt_tokens=100, completion_tokens=7)

    mistral_server.add(Rule(replies=[answer]))
    settings = load_settings(
        overrides={"model.max_retries": STORM + 1, "model.max_concurrency": CALLS}
    )
    client = ModelClient.from_settings(settings, backoff=Backoff(10, 50, 2.0, 5))
    replies: dict[str, str] = {}
    failures: list[BaseException] = []

    def call(i: int) -> None:
        about = f"src/m{i}.py"
        try:
            reply = client.complete(
                "generator",
                [{"role": "user", "content": f"write tests for {about}"}],
                prompt=PROMPT,
                about=about,
            )
            replies[about] = reply.text
        except BaseException as exc:  # surfaced below: a thread must not swallow it
            failures.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(CALLS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert failures == []
    assert replies == {f"src/m{i}.py": f"reply for src/m{i}.py" for i in range(CALLS)}
    # Exactly the storm plus one success per call: no runaway retrying, no extra requests.
    assert len(mistral_server.requests) == CALLS * (STORM + 1)
    assert set(seen.values()) == {STORM + 1}
    records = client.records
    assert len(records) == CALLS
    assert all(r.ok and r.attempts == STORM + 1 for r in records)
    # Tokens come from the successful replies only (the 429s carry no usage).
    assert client.tokens == CALLS * 107
    assert {(r.input_tokens, r.output_tokens) for r in records} == {(100, 7)}
