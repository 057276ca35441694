"""The scripted Mistral server itself, spoken to with plain http.client (no SDK)."""

from __future__ import annotations

import http.client
import json
import os
import threading
from typing import Any

import pytest

from tests.fakes.mistral_server import (
    MistralServer,
    RecordedRequest,
    Rule,
    error,
    malformed,
    ok,
    slow,
    truncated,
)
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

pytestmark = pytest.mark.slow


def post(
    server: MistralServer,
    body: dict[str, Any],
    path: str = "/v1/chat/completions",
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        res = conn.getresponse()
        return res.status, dict(res.getheaders()), res.read()
    finally:
        conn.close()


def chat(text: str, model: str = "m", schema: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    if schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": schema}}
    return body


def test_fixture_points_settings_at_the_server(mistral_server: MistralServer) -> None:
    assert os.environ["AUTOPILOT_MODEL_URL"] == mistral_server.url
    assert mistral_server.url.startswith("http://127.0.0.1:")
    assert os.environ["MISTRAL_API_KEY"]


def test_completion_shape(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[ok("hello", prompt_tokens=7, completion_tokens=3)]))

    status, _, raw = post(mistral_server, chat("hi", model="codestral-latest"))

    doc = json.loads(raw)
    assert status == 200
    assert doc["object"] == "chat.completion"
    assert doc["model"] == "codestral-latest"
    assert isinstance(doc["id"], str) and isinstance(doc["created"], int)
    assert doc["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello", "tool_calls": None},
            "finish_reason": "stop",
        }
    ]
    assert doc["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_rules_match_in_order_and_last_reply_repeats(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=["j1", "j2"]))
    mistral_server.add(Rule(name="user", about="app/models/user.rb", replies=["u"]))
    mistral_server.add(Rule(name="large", model="mistral-large-latest", replies=["L"]))
    mistral_server.add(Rule(name="fn", when=lambda r: "echo" in r.text, replies=[echo]))

    def content(body: dict[str, Any]) -> str:
        return str(json.loads(post(mistral_server, body)[2])["choices"][0]["message"]["content"])

    assert content(chat("x", schema="judge_verdict")) == "j1"
    assert content(chat("x", schema="judge_verdict")) == "j2"
    assert content(chat("x", schema="judge_verdict")) == "j2"
    assert content(chat("File: app/models/user.rb")) == "u"
    assert content(chat("x", model="mistral-large-latest")) == "L"
    assert content(chat("please echo")) == "echo:please echo"
    assert [r.rule for r in mistral_server.requests] == ["judge"] * 3 + ["user", "large", "fn"]


def echo(req: RecordedRequest) -> str:
    return f"echo:{req.text}"


def test_unmatched_request_gets_a_clear_500_and_is_recorded(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(contains="never", replies=["x"]))

    status, _, raw = post(mistral_server, chat("something else"))

    assert status == 500
    assert "no rule matches request: something else" in raw.decode()
    assert len(mistral_server.unmatched) == 1
    assert mistral_server.requests == mistral_server.unmatched


def test_faults_rule_and_global(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(faults=[error(429, retry_after=2), error(502)], replies=["fine"]))
    mistral_server.fail_next(error(503))

    first = post(mistral_server, chat("a"))
    second = post(mistral_server, chat("a"))
    third = post(mistral_server, chat("a"))
    fourth = post(mistral_server, chat("a"))

    assert [first[0], second[0], third[0], fourth[0]] == [503, 429, 502, 200]
    assert second[1]["Retry-After"] == "2"
    assert mistral_server.requests[0].rule == "<fault>"


def test_malformed_body(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[malformed()]))
    status, _, raw = post(mistral_server, chat("a"))
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_truncated_body(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[truncated("a long enough reply")]))
    with pytest.raises(http.client.IncompleteRead):
        post(mistral_server, chat("a"))


def test_slow_reply_trips_a_client_timeout(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[slow(2), "fast"]))
    with pytest.raises(TimeoutError):
        post(mistral_server, chat("a"), timeout=0.3)
    assert post(mistral_server, chat("a"))[0] == 200


def test_unknown_path_is_404_and_bodies_are_recorded(mistral_server: MistralServer) -> None:
    assert post(mistral_server, chat("a"), path="/v1/embeddings")[0] == 404
    assert mistral_server.requests == []  # only chat completions are scripted and recorded
    mistral_server.add(Rule(replies=["x"]))
    post(mistral_server, chat("payload text"))
    req = mistral_server.requests[0]
    assert req.body == chat("payload text")
    assert b"payload text" in req.raw
    assert req.messages[0]["content"] == "payload text"


def test_in_flight_count_and_latency_option() -> None:
    with MistralServer([Rule(replies=["x"])], latency_s=0.3) as server:
        threads = [threading.Thread(target=post, args=(server, chat("a"))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.requests) == 3
        assert server.max_in_flight == 3
        assert server.in_flight == 0
