"""`autopilot config show` through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AUTOPILOT = Path(sys.executable).parent / "autopilot"


def _autopilot(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AUTOPILOT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_show_json_masks_the_key_and_names_sources(tmp_path: Path) -> None:
    (tmp_path / "autopilot.toml").write_text("[gates]\nmin_coverage = 0.5\n")
    done = _autopilot(
        "config",
        "show",
        "--repo",
        str(tmp_path),
        "--set",
        "gates.min_judge=0.75",
        "--json",
        MISTRAL_API_KEY="sk-do-not-print",
        AUTOPILOT_SANDBOX__TIMEOUT_S="60",
    )
    assert done.returncode == 0, done.stderr
    assert "sk-do-not-print" not in done.stdout + done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["settings"]}
    assert rows["mistral_api_key"] == {
        "name": "mistral_api_key",
        "env": "MISTRAL_API_KEY",
        "value": "****",
        "source": "environment",
    }
    assert rows["gates.min_coverage"]["source"] == "autopilot.toml"
    assert rows["gates.min_judge"] == {
        "name": "gates.min_judge",
        "env": "AUTOPILOT_GATES__MIN_JUDGE",
        "value": 0.75,
        "source": "option",
    }
    assert rows["sandbox.timeout_s"]["source"] == "environment"


def test_show_table_one_line_per_setting(tmp_path: Path) -> None:
    done = _autopilot("config", "show", "--repo", str(tmp_path), MISTRAL_API_KEY="")
    assert done.returncode == 0, done.stderr
    key = [line for line in done.stdout.splitlines() if line.startswith("mistral_api_key ")]
    assert len(key) == 1 and "(unset)" in key[0] and "default" in key[0]


def test_bad_set_and_bad_value_are_one_line() -> None:
    done = _autopilot("config", "show", "--set", "gates.min_judge")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "NAME=VALUE" in done.stderr
    done = _autopilot("config", "show", "--set", "gates.min_judge=7")
    assert done.returncode == 2 and "min_judge" in done.stderr
