"""The SDK's serializer classes are built once per type: a real completion through the SDK
against the scripted server builds none the second time, and still reads the reply right."""

from __future__ import annotations

from typing import Any

from mistralai.client.utils import serializers

from tasks.model import sdk_speed
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.model.test_client import MESSAGES, PROMPT, make_client


def test_a_second_completion_builds_no_serializer_class(mistral_server: MistralServer) -> None:
    mistral_server.add(Rule(replies=["first reply", "second reply"]))
    client = make_client()
    assert sdk_speed.install() is True
    text, _ = client.complete_parsed("generator", MESSAGES, str, prompt=PROMPT, about="a.py")
    assert text == "first reply"
    made = dict(sdk_speed._MADE)
    text, record = client.complete_parsed("generator", MESSAGES, str, prompt=PROMPT, about="a.py")
    assert text == "second reply"
    assert record.ok
    assert made == sdk_speed._MADE  # every class the second call needed was already made
    assert made, "the SDK's serializers no longer go through create_model: re-check sdk_speed"


def test_what_cannot_be_keyed_is_built_as_before() -> None:
    sdk_speed.install()
    unhashable: Any = {"not": "hashable"}
    a = serializers.create_model("Other", body=(int, ...), extra=(str, ...))
    b = serializers.create_model("Other", body=(int, ...), extra=(str, ...))
    assert a is not b  # other arguments: not memoised
    c = serializers.create_model("Unmarshaller", body=(int, ...), __config__=None)
    assert c is serializers.create_model("Unmarshaller", body=(int, ...), __config__=None)
    assert sdk_speed._key("X", {"body": unhashable, "__config__": None}) is None
    assert serializers.unmarshal({"body": 3}["body"], int) == 3
