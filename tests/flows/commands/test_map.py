"""`autopilot map` through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

AUTOPILOT = Path(sys.executable).parent / "autopilot"


def _autopilot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AUTOPILOT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def _rails(root: Path) -> Path:
    for name in (
        "Gemfile",
        "app/models/user.rb",
        "app/controllers/admin/users_controller.rb",
        "app/models/application_record.rb",
        "spec/models/user_spec.rb",
        "spec/controllers/admin/users_controller_spec.rb",
        "app/services/billing.rb",
        "app/services/[odd].rb",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


@pytest.mark.slow
def test_json_document(tmp_path: Path) -> None:
    proc = _autopilot("map", "--repo", str(_rails(tmp_path)), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc == {
        "toolchain": "ruby-rspec",
        "files": [
            {
                "source": "app/controllers/admin/users_controller.rb",
                "kind": "controller",
                "specs": ["spec/controllers/admin/users_controller_spec.rb"],
                "expected_spec": "spec/requests/admin/users_spec.rb",
            },
            {
                "source": "app/models/user.rb",
                "kind": "model",
                "specs": ["spec/models/user_spec.rb"],
                "expected_spec": "spec/models/user_spec.rb",
            },
            {
                "source": "app/services/[odd].rb",
                "kind": "ruby",
                "specs": [],
                "expected_spec": "spec/services/[odd]_spec.rb",
            },
            {
                "source": "app/services/billing.rb",
                "kind": "ruby",
                "specs": [],
                "expected_spec": "spec/services/billing_spec.rb",
            },
        ],
        "untested": ["app/services/[odd].rb", "app/services/billing.rb"],
        "warnings": [],  # an addition to the documented document (README)
    }


@pytest.mark.slow
def test_table_and_summary(tmp_path: Path) -> None:
    proc = _autopilot("map", "--repo", str(_rails(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "app/models/user.rb" in out and "spec/models/user_spec.rb" in out
    row = next(line for line in out.splitlines() if "app/services/billing.rb" in line)
    assert "untested" in row and "new: spec/services/billing_spec.rb" in row
    # A file name that looks like rich markup is printed as it is.
    assert "app/services/[odd].rb" in out
    assert out.strip().splitlines()[-1] == "4 files, 2 untested"


@pytest.mark.slow
def test_toolchain_override_from_environment(tmp_path: Path) -> None:
    # Both toolchains match; detection picks ruby, the setting picks python.
    _rails(tmp_path)
    for name in ("pyproject.toml", "tests/test_calc.py", "calc.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    proc = _autopilot(
        "map", "--repo", str(tmp_path), "--json", env={"AUTOPILOT_TOOLCHAIN": "python-pytest"}
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["toolchain"] == "python-pytest"
    assert doc["files"] == [
        {
            "source": "calc.py",
            "kind": "python",
            "specs": ["tests/test_calc.py"],
            "expected_spec": "tests/test_calc.py",
        }
    ]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing", "no-toolchain"])
def test_bad_repo_exits_2_with_one_line(tmp_path: Path, case: str) -> None:
    repo = tmp_path / "missing" if case == "missing" else tmp_path
    if case == "no-toolchain":
        (tmp_path / "README.md").write_text("hi\n")
    proc = _autopilot("map", "--repo", str(repo), "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("autopilot: error: ") and str(repo) in lines[0]
    assert ("not a directory" if case == "missing" else "no toolchain detected") in lines[0]


@pytest.mark.slow
def test_map_does_not_import_prefect(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from flows.commands.map import run\n"
        f"assert run(Path({str(_rails(tmp_path))!r}), True) == 0\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'prefect'], 'prefect imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
