"""Redaction by value: every secret Autopilot holds, in every form a test could print it in."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from tasks.core.config import load_settings
from tasks.core.secret_values import (
    Registry,
    meaningful,
    register_environment,
    register_secret,
    secret_env_name,
    trie_pattern,
)
from tasks.core.secrets import REDACTED, redact, redact_known, redact_validation
from tasks.core.types import TestCaseResult, ValidationResult
from tests.secret_forms import disguises, fresh, leaked


def test_every_disguise_of_a_registered_secret_is_redacted() -> None:
    value = fresh()
    text = "\n".join(f"{name}: {form}" for name, form in disguises(value).items())
    assert leaked(value, redact(text))  # before registering: patterns alone let them through
    register_secret(value)
    out = redact(text)
    assert leaked(value, out) == [], out
    assert out.count(REDACTED) >= len(disguises(value))
    assert "plain: " in out and "tail" not in value  # the rest of the text stays


def test_the_cache_forgets_answers_given_before_a_secret_was_registered() -> None:
    value = fresh()
    text = f"the test printed {value[::-1]} here"
    assert redact(text) == text  # now cached
    register_secret(value)
    assert redact(text) == f"the test printed {REDACTED} here"
    assert redact_known(text) == f"the test printed {REDACTED} here"


def test_short_words_and_paths_are_not_redacted_by_value() -> None:
    registry = Registry()
    assert registry.add(
        ["short", "postgres", "/usr/lib/python3:/usr/lib", None, SecretStr("")]
    ) is (False)
    assert not meaningful("1234567") and meaningful("hunter2!x") and meaningful("12345678")
    registry.add([SecretStr("S3cret-value-9")])
    assert registry.redact("a postgres S3cret-value-9 b", "#") == "a postgres # b"


def test_many_secrets_make_one_pattern_that_prefers_the_longest() -> None:
    pattern = trie_pattern(["abcdef", "abc", "abcxyz", "q"])
    assert re.sub(pattern, "#", "abcdefg abcx abcxyz q") == "#g #x # #"
    registry = Registry()
    values = [fresh() for _ in range(50)]
    registry.add(values)
    text = " ".join(v[::-1] for v in values)
    assert registry.redact(text, "#") == " ".join("#" for _ in values)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("MISTRAL_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_SESSION_TOKEN", True),
        ("PREFECT_API_KEY", True),
        ("GITLAB_TOKEN", True),
        ("STRIPE_SECRET_KEY", True),
        ("DB_PASSWORD", True),
        ("npm_token", True),
        ("PWD", False),
        ("OLDPWD", False),
        ("SSH_AUTH_SOCK", False),
        ("GOOGLE_APPLICATION_CREDENTIALS_FILE", False),
        ("AWS_REGION", False),
        ("KEYTIMEOUT", False),
    ],
)
def test_secret_variables_by_name(name: str, secret: bool) -> None:
    assert secret_env_name(name) is secret


def test_loading_the_settings_registers_the_environments_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key, aws, passed = fresh(), fresh(), fresh()
    monkeypatch.setenv("MISTRAL_API_KEY", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", aws)
    monkeypatch.setenv("PROJECT_DB_URL", passed)
    monkeypatch.setenv("AUTOPILOT_SANDBOX__PASS_ENV", '["PROJECT_DB_URL"]')
    text = f"{key[::-1]} {base64.b64encode(aws.encode()).decode()} {passed.encode().hex()}"
    assert redact(text) == text
    load_settings()
    assert redact(text) == " ".join([REDACTED] * 3)


def test_register_environment_reads_only_secret_names() -> None:
    token, plain = fresh(), fresh()
    register_environment({"SENTRY_AUTH_TOKEN": token, "APP_MODE": plain})
    assert redact(f"{token} {plain}") == f"{REDACTED} {plain}"


def test_validation_results_lose_every_form(tmp_path: Path) -> None:
    value = fresh()
    register_secret(value)
    forms = disguises(value)
    case = TestCaseResult(
        id="t",
        name="t",
        status="failed",
        message=f"AssertionError: {forms['reversed']}",
        trace=forms["b64-in-stream-1"],
        stdout=forms["hex"],
        stderr=forms["HEX"],
    )
    result = ValidationResult(
        toolchain="python-pytest", loaded=False, examples=[case], load_error=forms["b64-urlsafe"]
    )
    text = redact_validation(result).model_dump_json()
    assert leaked(value, text) == [], text


def test_the_archive_keeps_no_registered_secret(tmp_path: Path) -> None:
    from tasks.keep.archive import open_archive

    value = fresh()
    register_secret(value)
    run = open_archive(str(tmp_path / "archive")).run("nightly", "run-1")
    run.put_text("notes.md", f"printed {value[::-1]}\n")
    run.put_json("doc.json", {"out": base64.b64encode(value.encode()).decode()})
    run.finalize()
    for path in (tmp_path / "archive").rglob("*"):
        if path.is_file():
            assert leaked(value, path.read_text()) == [], path
