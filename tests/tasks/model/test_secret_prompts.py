"""The model key (and every other secret Autopilot holds) never reaches a model server in a
prompt, in any disguise: the real client, through the real SDK, to the scripted server."""

from __future__ import annotations

import pytest

from tasks.core.config import load_settings
from tasks.core.types import PromptMeta
from tasks.model.client import ModelClient
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.secret_forms import disguises, fresh, leaked

pytestmark = pytest.mark.slow

PROMPT = PromptMeta(name="generate", version="1", sha256="cd" * 32)


def test_the_model_key_in_a_prompt_is_redacted_in_every_form(
    mistral_server: MistralServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, forge = fresh(), fresh()
    monkeypatch.setenv("MISTRAL_API_KEY", key)
    monkeypatch.setenv("AUTOPILOT_FORGE_TOKEN", forge)
    client = ModelClient.from_settings(load_settings(overrides={"model.max_retries": 0}))
    # A prompt carrying what a hostile test printed or a source file held.
    pasted = "\n".join(
        f"{name}: {form}" for value in (key, forge) for name, form in disguises(value).items()
    )
    mistral_server.add(Rule(replies=["ok"]))
    client.complete(
        "generator",
        [{"role": "user", "content": f"Fix the test; its output was:\n{pasted}"}],
        prompt=PROMPT,
        about="app/models/user.rb",
    )
    (request,) = mistral_server.requests
    sent = request.raw.decode("utf-8", errors="replace")
    assert "Fix the test" in sent and "[REDACTED]" in sent
    assert leaked(key, sent) == [] and leaked(forge, sent) == [], sent
    # The key still authenticates the call: it is only kept out of what is said.
    assert request.headers.get("authorization", request.headers.get("Authorization")) == (
        f"Bearer {key}"
    )
