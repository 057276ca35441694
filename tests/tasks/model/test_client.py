"""ModelClient through the real mistralai SDK against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from tasks.core.config import load_settings
from tasks.core.errors import ConfigError, ModelError, ReplyFormatError
from tasks.model.client import CallRecord, Message, ModelClient, PromptMeta
from tasks.model.replies import parse_files_reply, parse_json_reply
from tasks.model.transport import Backoff
from tests.fakes.mistral_server import (
    MistralServer,
    Rule,
    error,
    malformed,
    ok,
    slow,
    truncated,
)
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

pytestmark = pytest.mark.slow

FAST = Backoff(initial_ms=10, max_ms=50, exponent=2.0, jitter_ms=5)
PROMPT = PromptMeta(name="diagnose", version="3", sha256="ab" * 32)
ABOUT = "app/models/user.rb"
MESSAGES = [
    {"role": "system", "content": "You diagnose failing tests."},
    {"role": "user", "content": "NoMethodError: undefined method `name' for nil"},
]


class Block(BaseModel):
    file_path: str
    start_line: int
    end_line: int
    description: str


class Diagnosis(BaseModel):
    root_cause: str
    affected_code_blocks: list[Block]
    repair_strategy: str
    confidence: float = Field(ge=0, le=1)


GOOD = json.dumps(
    {
        "root_cause": "user is nil",
        "affected_code_blocks": [
            {"file_path": ABOUT, "start_line": 3, "end_line": 5, "description": "name"}
        ],
        "repair_strategy": "guard against nil",
        "confidence": 0.8,
    }
)


def make_client(**overrides: object) -> ModelClient:
    values: dict[str, object] = {"model.max_retries": 3, "model.max_reasks": 2}
    values.update({f"model.{k}": v for k, v in overrides.items()})
    return ModelClient.from_settings(load_settings(overrides=values), backoff=FAST)


def diagnose(client: ModelClient) -> tuple[Diagnosis, CallRecord]:
    return client.structured(
        "diagnostician", MESSAGES, Diagnosis, schema_name="diagnosis", prompt=PROMPT, about=ABOUT
    )


def test_structured_reply_is_validated_and_tokens_recorded(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[ok(GOOD, prompt_tokens=120, completion_tokens=30)]))
    client = make_client()

    diagnosis, record = diagnose(client)

    assert diagnosis.root_cause == "user is nil"
    assert diagnosis.affected_code_blocks[0].start_line == 3
    assert (record.input_tokens, record.output_tokens) == (120, 30)
    assert (record.attempts, record.reasks, record.ok) == (1, 0, True)
    assert (record.prompt_name, record.prompt_version, record.about) == ("diagnose", "3", ABOUT)
    assert record.model == "mistral-large-latest"
    assert (client.tokens, client.calls, client.records) == (150, 1, [record])
    body = mistral_server.requests[0].body
    assert body is not None
    assert body["model"] == "mistral-large-latest"
    strict_schema = Diagnosis.model_json_schema()
    strict_schema["additionalProperties"] = False
    strict_schema["$defs"]["Block"]["additionalProperties"] = False
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "diagnosis",
            "schema": strict_schema,
            "strict": True,
        },
    }
    assert mistral_server.requests[0].headers["Authorization"] == "Bearer test-key-not-real"


def test_429_with_retry_after_then_ok(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[error(429, retry_after=1), GOOD]))

    diagnosis, record = diagnose(make_client())

    assert diagnosis.confidence == 0.8
    assert len(mistral_server.requests) == 2
    assert record.attempts == 2


def test_500_twice_then_ok(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(faults=[error(500), error(503)], replies=[GOOD]))

    _, record = diagnose(make_client())

    assert len(mistral_server.requests) == 3
    assert (record.attempts, record.ok) == (3, True)


def test_timeout_then_ok(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[slow(3, GOOD), GOOD]))

    diagnosis, record = diagnose(make_client(timeout_s=0.5))

    assert diagnosis.repair_strategy == "guard against nil"
    assert len(mistral_server.requests) == 2
    assert record.attempts == 2


def test_persistent_500_fails_after_bounded_attempts(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[error(500, body='{"message": "overloaded"}')]))
    client = make_client(max_retries=3)

    with pytest.raises(ModelError) as caught:
        diagnose(client)

    assert len(mistral_server.requests) == 4  # max_retries + 1
    message = str(caught.value)
    assert "\n" not in message
    assert "HTTP 500" in message and "overloaded" in message
    assert "diagnostician" in message and "mistral-large-latest" in message
    assert client.records[0].ok is False
    assert client.records[0].error == message


@pytest.mark.parametrize("fault", [malformed, truncated], ids=["malformed", "truncated"])
def test_broken_body_once_is_retried(mistral_server: MistralServer, fault: object) -> None:
    assert callable(fault)
    mistral_server.add(Rule(faults=[fault()], replies=[GOOD]))

    _, record = diagnose(make_client())

    assert len(mistral_server.requests) == 2
    assert record.ok


@pytest.mark.parametrize("fault", [malformed, truncated], ids=["malformed", "truncated"])
def test_broken_body_always_gives_one_clear_error(
    mistral_server: MistralServer, fault: object
) -> None:
    assert callable(fault)
    mistral_server.add(Rule(replies=[fault()]))

    with pytest.raises(ModelError) as caught:
        diagnose(make_client(max_retries=2))

    assert len(mistral_server.requests) == 3
    assert "\n" not in str(caught.value)
    assert "after 3 attempts" in str(caught.value)


def test_401_is_not_retried(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=[error(401, body='{"message": "Unauthorized"}')]))

    with pytest.raises(ModelError, match="authentication failed") as caught:
        diagnose(make_client())

    assert len(mistral_server.requests) == 1
    assert "diagnostician" in str(caught.value)


def test_invalid_json_is_reasked_with_the_parse_error(mistral_server: MistralServer) -> None:
    bad = '{"root_cause": "user is nil", "confidence": 2}'
    mistral_server.add(Rule(replies=[bad, f"```json\n{GOOD}\n```"]))
    with pytest.raises(ReplyFormatError) as expected:
        parse_json_reply(bad, Diagnosis)

    diagnosis, record = diagnose(make_client())

    assert diagnosis.confidence == 0.8
    assert (record.reasks, record.attempts) == (1, 2)
    second = mistral_server.requests[1].messages
    assert (second[-2]["role"], second[-2]["content"]) == ("assistant", bad)
    assert second[-1]["role"] == "user"
    assert str(expected.value) in second[-1]["content"]
    assert "confidence" in second[-1]["content"]


def test_always_invalid_raises_after_max_reasks(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["I think the user is nil."]))
    client = make_client(max_reasks=2)

    with pytest.raises(ReplyFormatError) as caught:
        diagnose(client)

    assert len(mistral_server.requests) == 3  # max_reasks + 1
    message = str(caught.value)
    assert message.startswith(f"{ABOUT}: diagnostician reply")
    assert "after 2 re-asks" in message and "invalid JSON" in message
    assert "\n" not in message
    assert client.records[0].reasks == 2 and not client.records[0].ok


def test_files_reply_reasked_when_path_outside_test_tree(mistral_server: MistralServer) -> None:
    wrong = "app/models/user.rb\n```ruby\nclass User; end\n```\n"
    right = "spec/models/user_spec.rb\n```ruby\nRSpec.describe User do\nend\n```\n"
    mistral_server.add(Rule(replies=[wrong, right]))

    files, record = make_client().complete_parsed(
        "generator", MESSAGES, parse_files_reply, prompt=PROMPT, about=ABOUT
    )

    assert files == {"spec/models/user_spec.rb": "RSpec.describe User do\nend\n"}
    assert record.reasks == 1
    reask = mistral_server.requests[1].messages[-1]["content"]
    assert "app/models/user.rb: only files under spec/, tests/ may be written" in reask
    assert mistral_server.requests[0].model == "codestral-latest"


def test_about_path_is_in_every_request(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["ok"]))
    client = make_client()
    client.complete("judge", MESSAGES, prompt=PROMPT, about="spec/models/user_spec.rb")
    client.complete("surgeon", [Message(role="user", content="fix it")], prompt=PROMPT, about=ABOUT)
    mentioned = [{"role": "user", "content": f"Fix {ABOUT} please"}]
    client.complete("generator", mentioned, prompt=PROMPT, about=ABOUT)

    first, second, third = mistral_server.requests
    assert first.messages[0]["content"].endswith("\n\nFile: spec/models/user_spec.rb")
    assert second.messages[0] == {"role": "system", "content": f"File: {ABOUT}"}
    assert third.messages == mentioned  # already named: not added twice
    assert [r.about for r in client.records] == ["spec/models/user_spec.rb", ABOUT, ABOUT]


def test_scout_uses_the_diagnostician_model(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["parsed"]))
    client = make_client()

    reply = client.complete("scout", MESSAGES, prompt=PROMPT, about="log/test.log")

    assert reply.text == "parsed"
    assert client.model_for("scout") == client.model_for("diagnostician")
    assert mistral_server.requests[0].model == "mistral-large-latest"


def test_concurrency_limit_holds_across_threads(mistral_server: MistralServer) -> None:
    mistral_server.latency_s = 0.3
    mistral_server.add(Rule(replies=["done"]))
    client = make_client(max_concurrency=2)
    failures: list[BaseException] = []

    def call(i: int) -> None:
        try:
            client.complete("judge", MESSAGES, prompt=PROMPT, about=f"spec/s{i}_spec.rb")
        except BaseException as exc:  # surfaced below: a thread must not swallow it
            failures.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert failures == []
    assert len(mistral_server.requests) == 8
    assert client.calls == 8
    assert mistral_server.max_in_flight == 2


def test_server_url_with_v1_suffix_works(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["fine"]))
    settings = load_settings(overrides={"model_url": mistral_server.url + "/v1/"})

    reply = ModelClient.from_settings(settings, backoff=FAST).complete(
        "generator", MESSAGES, prompt=PROMPT, about=ABOUT
    )

    assert reply.text == "fine"
    assert mistral_server.requests[0].path == "/v1/chat/completions"


def test_unreachable_server_fails_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", f"http://127.0.0.1:{port}")

    with pytest.raises(ModelError, match=r"after 3 attempts: ConnectError"):
        make_client(max_retries=2).complete("judge", MESSAGES, prompt=PROMPT, about=ABOUT)


def test_no_model_configured_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no model configured"):
        ModelClient.from_settings(load_settings())


def test_secrets_never_reach_the_server(mistral_server: MistralServer, tmp_path: Path) -> None:
    from tasks.core.secrets import SecretFileError, read_for_prompt

    repo = tmp_path / "app"
    (repo / "app/models").mkdir(parents=True)
    (repo / ".ssh").mkdir()
    aws = "AKIAZ7QW3RT5YU8IOP2L"
    password = "Tr0ub4dor&3-horse"
    env_secret = "sk_live_51HqLyjWDarjtT1zdp7dcXYZ"
    rsa_body = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2d4p8ZQy"
    (repo / ".env").write_text(f"STRIPE_KEY={env_secret}\nDB_PASSWORD={password}\n")
    (repo / ".ssh/id_rsa").write_text(
        f"-----BEGIN RSA PRIVATE KEY-----\n{rsa_body}\n-----END RSA PRIVATE KEY-----\n"
    )
    (repo / "app/models/billing.rb").write_text(
        "class Billing\n"
        f"  ACCESS_KEY_ID = '{aws}'\n"
        f'  password = "{password}"\n'
        "  def charge(amount) = amount * 100\n"
        "end\n"
    )
    mistral_server.add(Rule(replies=["spec/models/billing_spec.rb\n```ruby\nx\n```\n"]))
    client = make_client()

    for rel in (".env", ".ssh/id_rsa"):
        with pytest.raises(SecretFileError, match="may hold secrets"):
            read_for_prompt(repo, rel)
    source = read_for_prompt(repo, "app/models/billing.rb")
    client.complete_parsed(
        "generator",
        [{"role": "user", "content": f"Write a spec for:\n{source}"}],
        parse_files_reply,
        prompt=PROMPT,
        about="app/models/billing.rb",
    )
    # Last line of defence: raw secret file content pasted by some other code path.
    client.complete(
        "generator",
        [
            {"role": "user", "content": (repo / ".env").read_text()},
            {"role": "user", "content": (repo / ".ssh/id_rsa").read_text()},
        ],
        prompt=PROMPT,
        about="app/models/billing.rb",
    )

    assert len(mistral_server.requests) == 2
    sent = b"".join(r.raw for r in mistral_server.requests)
    assert b"def charge(amount) = amount * 100" in sent  # the code itself did go out
    for secret in (aws, password, env_secret, rsa_body):
        assert secret.encode() not in sent, secret
        assert json.dumps(secret)[1:-1].encode() not in sent, secret
