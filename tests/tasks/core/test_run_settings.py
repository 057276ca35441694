"""``[envs]``, ``[services]`` and ``[forge]`` are settings like the others: read from
``autopilot.toml`` and the environment, validated, one clear line when wrong (``[forge]`` is
the operator's: from the environment only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import Settings, load_settings
from tasks.core.errors import ConfigError
from tests.paths import EXAMPLES


def test_the_postgres_example_loads_with_its_services() -> None:
    settings = load_settings(EXAMPLES / "rails_pg")
    assert settings.services.postgres is True and settings.services.any
    assert settings.envs.prepare and not settings.forge.configured


def test_defaults_declare_nothing() -> None:
    settings = load_settings(None)
    assert not settings.services.any and settings.envs.network and settings.forge.kind is None


def test_tables_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "autopilot.toml").write_text(
        '[envs]\nnetwork = false\nkeep = 3\n[services]\npostgres = "15"\nredis = true\n'
    )
    monkeypatch.setenv("AUTOPILOT_ENVS__INSTALL_TIMEOUT_S", "60")
    monkeypatch.setenv("AUTOPILOT_FORGE__KIND", "github")
    monkeypatch.setenv("AUTOPILOT_FORGE__REPOSITORY", "acme/shop")
    monkeypatch.setenv("AUTOPILOT_FORGE__BASE", "develop")
    settings = load_settings(tmp_path)
    assert settings.envs.keep == 3 and not settings.envs.network
    assert settings.envs.install_timeout_s == 60
    assert settings.services.postgres == "15" and settings.services.redis is True
    assert settings.forge.api == "https://api.github.com" and settings.forge.base == "develop"


@pytest.mark.parametrize(
    ("toml", "env", "words"),
    [
        ('[services]\npostgres = "fifteen"\n', {}, "services.postgres"),
        ("[services]\nmysql = true\n", {}, "services.mysql"),
        ("", {"AUTOPILOT_FORGE__KIND": "github"}, "forge.repository"),
        (
            "",
            {"AUTOPILOT_FORGE__KIND": "github", "AUTOPILOT_FORGE__REPOSITORY": "no-slash"},
            "owner/name",
        ),
        ("[envs]\nkeep = 0\n", {}, "envs.keep"),
    ],
)
def test_a_wrong_value_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, env: dict[str, str], words: str
) -> None:
    (tmp_path / "autopilot.toml").write_text(toml)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_every_new_field_is_described() -> None:
    for group in ("envs", "services", "forge"):
        assert Settings.model_fields[group].description
        model = Settings.model_fields[group].annotation
        assert model is not None
        for name, field in model.model_fields.items():  # type: ignore[union-attr]
            assert field.description, f"{group}.{name}"
