"""`flows.commands.premerge.run`: bad input is one line and exit 2 before any flow starts (a
base or head neither here nor on the remote included); a pull request that changes no source
line to test is done at once, with no baseline run and no model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands.premerge import run
from tests.examples_repo import git, make_example_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    git(repo, "switch", "-q", "-c", "feature")
    (repo / "README.md").write_text("# Inventory\n\nNow with notes.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs only")
    git(repo, "switch", "-q", "main")
    return repo


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": "no-such-branch"}, "fetching"),
        ({"base": "main", "head": "--upload-pack=x"}, "not a valid ref"),
        ({"base": "main", "pr_number": 0}, "--pr-number"),
        ({"base": "main", "max_iterations": 0}, "--max-iterations"),
        ({"base": "main", "min_diff_coverage": 1.5}, "min_diff_coverage"),
        ({"base": "main", "archive": "ftp://host/x"}, "archive"),
        ({"base": "main", "max_model_calls": -1}, "--max-model-calls"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    repo: Path, capsys: pytest.CaptureFixture[str], kwargs: dict[str, object], message: str
) -> None:
    code = run(repo, **{"head": "feature", **kwargs})  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("autopilot: error: ") and message in err, err
    assert err.count("\n") == 1


def test_not_a_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path / "missing", base="main") == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_a_pull_request_without_a_source_line_to_test_is_done_at_once(
    repo: Path, prefect_harness: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = run(repo, base="main", head="feature", json_out=True, archive=str(tmp_path / "a"))
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["files"] == [] and doc["branch"] is None and doc["model_calls"] == 0
    assert doc["diff_coverage"]["before"] is None and doc["diff_coverage"]["after"] is None
    assert [(f["path"], f["skipped"]) for f in doc["changed"]] == [
        ("README.md", "not a source file (tests, docs, configuration)")
    ]
    assert doc["comment"] is None and doc["status"] is None
