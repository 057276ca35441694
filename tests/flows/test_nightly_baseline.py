"""The nightly never writes tests against a baseline that did not run: it says why and exits 1,
without a single model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands.nightly import run
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture


@pytest.mark.slow
def test_no_generation_against_a_baseline_that_did_not_run(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "tests/conftest.py").write_text("import hypothesis\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "property tests")

    code = run(repo, json_out=True, archive=str(tmp_path / "archive"))

    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 1
    assert doc["files"] == [] and doc["model_calls"] == 0 and doc["branch"] is None
    assert doc["baseline_error"] == (
        "the baseline suite did not run: pytest: ImportError while loading conftest "
        "'tests/conftest.py': ModuleNotFoundError: No module named 'hypothesis' (hypothesis is "
        "not importable by Autopilot's isolated interpreter (no project dependencies): set "
        "`python` in autopilot.toml to the project's interpreter, or install it there)"
    )
    assert f"autopilot: {doc['baseline_error']}" in captured.err.splitlines()
    assert mistral_server.requests == []
    archived = json.loads(
        next(
            (tmp_path / "archive" / "nightly").glob(f"*/{doc['run_id']}/baseline/audit.json")
        ).read_text()
    )
    assert archived["suite"]["ran"] is False
