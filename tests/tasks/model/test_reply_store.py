"""Every reply kept before it is used (tasks.model.reply_store), through the real SDK against
the scripted server: a second client (a resumed or repeated run) asks again only for what the
first never received."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.core.errors import ReplyFormatError
from tasks.model.client import ModelClient
from tasks.model.replies import parse_json_reply
from tests.fakes.mistral_server import MistralServer, Rule, ok
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.model.test_client import ABOUT, FAST, GOOD, MESSAGES, PROMPT, Diagnosis, diagnose

pytestmark = pytest.mark.slow


def client(**overrides: object) -> ModelClient:
    values = {"model.max_retries": 0, **{f"model.{k}": v for k, v in overrides.items()}}
    return ModelClient.from_settings(load_settings(overrides=values), backoff=FAST)


def _verdict(score: float) -> str:
    return json.dumps({"root_cause": f"s{score}", "affected_code_blocks": [],
                       "repair_strategy": "x", "confidence": score})  # fmt: skip


def test_a_second_run_replays_the_reply_and_sends_nothing(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[ok(GOOD, prompt_tokens=100, completion_tokens=20)]))
    first, record1 = diagnose(client())
    assert len(mistral_server.requests) == 1 and record1.attempts == 1

    again = client()
    second, record2 = diagnose(again)

    assert second == first
    assert len(mistral_server.requests) == 1  # nothing sent
    assert (record2.replayed, record2.attempts, record2.ok) == (1, 0, True)
    assert (again.calls, again.tokens) == (0, 0)  # neither a call nor tokens spent


def test_identical_requests_are_replayed_in_their_order(mistral_server: MistralServer) -> None:
    # Three judge samples of one spec are one request sent three times: three replies.
    mistral_server.add(Rule(replies=[_verdict(0.2), _verdict(0.6), _verdict(1.0)]))
    first = client()
    scores = [diagnose(first)[0].confidence for _ in range(3)]
    assert scores == [0.2, 0.6, 1.0]

    again = client()
    replayed = [diagnose(again)[0].confidence for _ in range(3)]
    assert replayed == scores and len(mistral_server.requests) == 3
    # A fourth sample was never received: it is asked for.
    diagnose(again)
    assert len(mistral_server.requests) == 4 and again.calls == 1


def test_a_reasked_call_is_replayed_with_its_reask(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["not json at all", GOOD]))
    _, record = diagnose(client())
    assert record.reasks == 1 and len(mistral_server.requests) == 2

    value, again = diagnose(client())
    assert value.root_cause == "user is nil"
    assert (again.reasks, again.replayed, again.attempts) == (1, 2, 0)
    assert len(mistral_server.requests) == 2


def test_a_reply_is_kept_before_it_is_used(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[GOOD]))

    def crash(text: str) -> Diagnosis:
        raise RuntimeError("the process died right after the reply arrived")

    with pytest.raises(RuntimeError):
        client().complete_parsed("diagnostician", MESSAGES, crash, prompt=PROMPT, about=ABOUT)
    value, record = client().complete_parsed(
        "diagnostician",
        MESSAGES,
        lambda t: parse_json_reply(t, Diagnosis),
        prompt=PROMPT,
        about=ABOUT,
    )
    assert value.confidence == 0.8 and record.replayed == 1
    assert len(mistral_server.requests) == 1


def test_a_damaged_entry_is_asked_again(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[GOOD]))
    diagnose(client())
    home = Path(load_settings().cache_root) / "replies"
    entries = list(home.rglob("*.json"))
    assert len(entries) == 1
    entries[0].write_text("{not json")
    _, record = diagnose(client())
    assert record.replayed == 0 and len(mistral_server.requests) == 2


def test_reuse_off_sends_every_request(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[GOOD]))
    diagnose(client(reuse_replies=False))
    _, record = diagnose(client(reuse_replies=False))
    assert record.replayed == 0 and len(mistral_server.requests) == 2
    assert not (Path(load_settings().cache_root) / "replies").exists()


def test_a_kept_malformed_reply_is_reasked_not_trusted(mistral_server: MistralServer) -> None:
    # What was kept is what came back: a reply that broke its format is re-asked on replay
    # exactly as it was the first time, never accepted because it came from disk.
    mistral_server.add(Rule(replies=["still not json"]))
    with pytest.raises(ReplyFormatError):
        diagnose(client(max_reasks=0))
    with pytest.raises(ReplyFormatError):
        diagnose(client(max_reasks=0))
    assert len(mistral_server.requests) == 1
