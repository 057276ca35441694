from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.core.errors import ConfigError


def test_defaults_without_repo_or_env() -> None:
    s = load_settings()
    assert s.gates.min_coverage == 0.9
    assert s.gates.min_judge == 0.7
    assert s.gates.flaky_runs == 3
    assert s.model_configured is False


def test_toml_in_repo_is_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "autopilot.toml").write_text(
        '[gates]\nmin_coverage = 0.5\nmin_judge = 0.6\n[repair]\nrisky_paths = ["db/**"]\n'
    )
    monkeypatch.setenv("AUTOPILOT_GATES__MIN_JUDGE", "0.8")
    s = load_settings(tmp_path)
    assert s.gates.min_coverage == 0.5
    assert s.gates.min_judge == 0.8
    assert s.repair.risky_paths == ["db/**"]


def test_secret_in_repo_toml_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "autopilot.toml").write_text('mistral_api_key = "sk-from-repo"\n')
    assert load_settings(tmp_path).mistral_api_key is None


def test_key_from_env_configures_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "k")
    s = load_settings()
    assert s.model_configured
    assert s.mistral_api_key is not None and s.mistral_api_key.get_secret_value() == "k"


def test_cli_overrides_win_and_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES__MIN_COVERAGE", "0.4")
    s = load_settings(overrides={"gates.min_coverage": 0.95, "gates.min_judge": None})
    assert s.gates.min_coverage == 0.95
    assert s.gates.min_judge == 0.7
    with pytest.raises(ConfigError, match="min_coverage"):
        load_settings(overrides={"gates.min_coverage": 3})


def test_broken_toml_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "autopilot.toml").write_text("[gates\n")
    with pytest.raises(ConfigError, match=r"autopilot\.toml"):
        load_settings(tmp_path)


def test_invalid_env_value_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "chroot")
    with pytest.raises(ConfigError, match="backend"):
        load_settings()


def test_python_interpreter_is_taken_from_the_repository_and_must_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)  # a virtualenv's python is a link: kept, not resolved
    (tmp_path / "autopilot.toml").write_text('python = ".venv/bin/python"\n')
    assert load_settings(tmp_path).python == str(python)
    monkeypatch.setenv("AUTOPILOT_PYTHON", "env/bin/python3")
    with pytest.raises(ConfigError, match=r"^invalid setting python: .*env/bin/python3 is not an"):
        load_settings(tmp_path)
    assert load_settings(None).python == "env/bin/python3"  # no repository: left as given
