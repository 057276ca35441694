"""The effective settings with their sources, empty values as unset, and docs/settings.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.core.settings_view import MASK, effective_settings, settings_markdown, undocumented
from tests.paths import REPO_ROOT


def test_every_setting_has_a_description() -> None:
    assert undocumented() == []


def test_docs_settings_md_is_current() -> None:
    page = (REPO_ROOT / "docs" / "settings.md").read_text()
    assert page == settings_markdown(), (
        "docs/settings.md is stale: run `.venv/bin/python -m tasks.core.settings_view "
        "> docs/settings.md`"
    )


@pytest.mark.parametrize(
    "name", ["MISTRAL_API_KEY", "AUTOPILOT_MODEL_URL", "AUTOPILOT_ARCHIVE", "AUTOPILOT_PYTHON"]
)
def test_empty_secret_or_url_means_unset(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "")
    settings = load_settings()
    assert settings.mistral_api_key is None and settings.model_url is None
    assert settings.archive is None and settings.python is None
    assert settings.model_configured is False


def test_blank_key_with_a_url_still_configures_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "   ")
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "http://127.0.0.1:9")
    settings = load_settings()
    assert settings.mistral_api_key is None
    assert settings.model_configured


def test_empty_nested_optional_is_unset_but_required_values_stay_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOPILOT_MODEL__SHARED_LIMIT", "")
    monkeypatch.setenv("AUTOPILOT_MODELS__SCOUT", "")
    settings = load_settings()
    assert settings.model.shared_limit is None and settings.models.scout is None
    # A setting with a real default keeps its validation: empty is not "unset" there.
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "")
    from tasks.core.errors import ConfigError

    with pytest.raises(ConfigError, match="backend"):
        load_settings()


def test_sources_follow_the_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "autopilot.toml").write_text(
        "[gates]\nmin_coverage = 0.5\nmin_judge = 0.6\nflaky_runs = 1\n[model]\ntimeout_s = 9\n"
    )
    monkeypatch.setenv("AUTOPILOT_GATES__MIN_JUDGE", "0.8")
    monkeypatch.setenv("autopilot_gates__flaky_runs", "2")  # names are case-insensitive
    rows = {r.name: r for r in effective_settings(tmp_path, {"gates.flaky_runs": 5})}
    assert (rows["gates.min_coverage"].value, rows["gates.min_coverage"].source) == (
        0.5,
        "autopilot.toml",
    )
    assert (rows["gates.min_judge"].value, rows["gates.min_judge"].source) == (0.8, "environment")
    assert (rows["gates.flaky_runs"].value, rows["gates.flaky_runs"].source) == (5, "option")
    assert rows["sandbox.backend"].source == "default"
    assert rows["gates.min_coverage_gain"].env == "AUTOPILOT_GATES__MIN_COVERAGE_GAIN"


def test_group_given_as_json_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES", '{"min_judge": 0.9}')
    rows = {r.name: r for r in effective_settings()}
    assert (rows["gates.min_judge"].value, rows["gates.min_judge"].source) == (0.9, "environment")
    assert rows["gates.min_coverage"].source == "default"


def test_secrets_and_url_passwords_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "sk-very-secret")
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "https://bob:hunter2@models.internal:8443")
    monkeypatch.setenv("AUTOPILOT_ARCHIVE", "s3://bucket/prefix")
    rows = {r.name: r for r in effective_settings()}
    assert rows["mistral_api_key"].value == MASK and rows["mistral_api_key"].secret
    assert rows["model_url"].value == f"https://{MASK}@models.internal:8443"
    assert rows["archive"].value == "s3://bucket/prefix"
    text = repr([r.model_dump() for r in rows.values()])
    assert "sk-very-secret" not in text and "hunter2" not in text
