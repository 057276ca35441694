"""`flows.commands.nightly.run` on a copy of examples/py_inventory: the JSON contract, exit codes,
no-model runs, bad input, and a failed run resumed without repeating finished files."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from flows.commands.nightly import run
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule, error
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.s3server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

ERRORS_TEST = """\
from inventory.errors import InsufficientStockError, InventoryError, UnitError, UnknownItemError


def test_unknown_item_error_names_the_sku():
    err = UnknownItemError("A1")
    assert str(err) == "unknown item 'A1'"
    assert err.sku == "A1"


def test_insufficient_stock_error_carries_the_numbers():
    err = InsufficientStockError("A1", 5, 2)
    assert str(err) == "cannot remove 5 of 'A1': only 2 on hand"
    assert (err.sku, err.requested, err.available) == ("A1", 5, 2)


def test_unit_error_is_an_inventory_error():
    assert issubclass(UnitError, InventoryError) is True
"""
FILE_KEYS = {
    "source",
    "kind",
    "spec",
    "verdict",
    "gate",
    "reasons",
    "iterations",
    "coverage_before",
    "coverage_after",
    "judge_score",
    "static_score",
    "mutation_score",  # an addition (issue 15)
    "tokens",
}
TOP_KEYS = {"run_id", "repo", "base_commit", "branch", "archive_uri", "model_calls", "tokens"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_example_repo("py_inventory", tmp_path / "inv")


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.slow
def test_no_model_reports_every_target_skipped_exits_0_and_archives_to_s3(
    repo: Path,
    prefect_harness: None,
    capsys: pytest.CaptureFixture[str],
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As compose passes them when unset: empty means no model (skipped, not a 401 per file).
    monkeypatch.setenv("MISTRAL_API_KEY", "")
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "")
    code = run(repo, only=["src/**"], json_out=True, archive=f"s3://{s3_bucket}/ci")

    doc = _json(capsys)
    assert code == 0
    assert set(doc) == TOP_KEYS | {"files"}
    assert doc["branch"] is None and doc["model_calls"] == 0
    prefix = f"ci/nightly/{dt.date.today().isoformat()}/{doc['run_id']}"
    assert doc["archive_uri"] == f"s3://{s3_bucket}/{prefix}"
    body = s3_server.client().get_object(Bucket=s3_bucket, Key=f"{prefix}/summary.json")["Body"]
    assert json.loads(body.read()) == doc
    manifest = s3_server.client().get_object(Bucket=s3_bucket, Key=f"{prefix}/manifest.json")
    keys = {o["key"] for o in json.loads(manifest["Body"].read())["objects"]}
    assert {"summary.json", "summary.md", "targets.json", "baseline/audit.json"} <= keys
    files = doc["files"]
    assert isinstance(files, list)
    # Untested first (csv_import, errors, reports have no test at all), lowest coverage first.
    assert {f["source"] for f in files[:3]} == {
        "src/inventory/csv_import.py",
        "src/inventory/errors.py",
        "src/inventory/reports.py",
    }
    before = [f["coverage_before"] for f in files[:3]]
    assert before == sorted(before)
    for f in files:
        assert set(f) == FILE_KEYS
        assert f["verdict"] == "skipped" and f["reasons"] == ["no model configured"]
    assert git(repo, "branch", "--list").split() == ["*", "main"]


@pytest.mark.slow
def test_failed_file_is_retried_on_the_next_run_and_finished_files_are_reused(
    repo: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    only = ["src/inventory/reports.py", "src/inventory/errors.py"]
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[files_reply(GOOD)]))
    # The first run: the model fails for errors.py (as if the run died there).
    errors_rule = mistral_server.add(Rule(about="src/inventory/errors.py", replies=[error(500)]))

    code = run(repo, only=only, json_out=True, archive=str(tmp_path / "arch"))

    first = _json(capsys)
    assert code == 1
    verdicts = {f["source"]: f["verdict"] for f in first["files"]}  # type: ignore[union-attr]
    assert verdicts == {"src/inventory/errors.py": "error", "src/inventory/reports.py": "accepted"}
    assert first["branch"] is not None
    assert git(repo, "show", f"{first['branch']}:tests/test_reports.py") == GOOD

    errors_rule.replies = [files_reply(ERRORS_TEST, "tests/test_errors.py")]
    errors_rule.served = 0
    seen = len(mistral_server.requests)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))

    code = run(repo, only=only, json_out=True, archive=str(tmp_path / "arch"), push=True)

    second = _json(capsys)
    assert code == 0, second
    new = mistral_server.requests[seen:]
    assert new and all("src/inventory/reports.py" not in r.text for r in new)
    assert {f["verdict"] for f in second["files"]} == {"accepted"}  # type: ignore[union-attr]
    branch = str(second["branch"])
    assert git(repo, "show", f"{branch}:tests/test_reports.py") == GOOD
    assert git(repo, "show", f"{branch}:tests/test_errors.py") == ERRORS_TEST
    # --push: the branch (and only it) reached the remote.
    assert git(origin, "for-each-ref", "--format=%(refname)").split() == [f"refs/heads/{branch}"]
    assert git(origin, "rev-parse", branch) == git(repo, "rev-parse", branch)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_files": -1}, "--max-files"),
        ({"max_iterations": 0}, "--max-iterations"),
        ({"only": [""]}, "empty glob"),
        ({"ref": "no-such-ref"}, "not a commit"),
        ({"min_coverage": 1.5}, "min_coverage"),
        ({"archive": "ftp://host/x"}, "archive"),
        ({"max_model_calls": -1}, "--max-model-calls"),
        ({"file_time_limit_s": 0.0}, "time limit"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    repo: Path, capsys: pytest.CaptureFixture[str], kwargs: dict[str, object], message: str
) -> None:
    code = run(repo, **kwargs)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("autopilot: error: ") and message in err
    assert err.count("\n") == 1


def test_not_a_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path / "missing") == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_dask_local_runner_generates_like_the_thread_runner(
    repo: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(replies=[files_reply(GOOD)]))

    code = run(
        repo,
        only=["src/inventory/reports.py"],
        dask="local",
        json_out=True,
        archive=str(tmp_path / "arch"),
    )

    doc = _json(capsys)
    assert code == 0
    assert doc["model_calls"] == 2
    assert [f["verdict"] for f in doc["files"]] == ["accepted"]  # type: ignore[union-attr]
    assert git(repo, "show", f"{doc['branch']}:tests/test_reports.py") == GOOD


@pytest.mark.slow
def test_rejections_exit_1_name_their_gate_emit_events_and_create_no_branch(
    repo: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import prefect.events

    from tests.tasks.generate.test_loop import VAGUE

    emitted: list[dict[str, object]] = []
    real_emit = prefect.events.emit_event

    def recording_emit(**kwargs: object) -> object:
        if kwargs.get("event") == "autopilot.gate.failed":
            emitted.append(kwargs)
        return real_emit(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(prefect.events, "emit_event", recording_emit)
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_GATES__MIN_COVERAGE_GAIN", "1.0")
    partial_errors = ERRORS_TEST.split("def test_insufficient_stock")[0].rstrip() + "\n"
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[files_reply(VAGUE)]))
    mistral_server.add(
        Rule(
            about="src/inventory/errors.py",
            replies=[files_reply(partial_errors, "tests/test_errors.py")],
        )
    )
    only = ["src/inventory/reports.py", "src/inventory/errors.py"]

    code = run(repo, only=only, max_iterations=1, json_out=True, archive=str(tmp_path / "a"))

    doc = _json(capsys)
    assert code == 1
    assert doc["branch"] is None
    by = {f["source"]: f for f in doc["files"]}  # type: ignore[union-attr]
    assert by["src/inventory/reports.py"]["gate"] == "static"
    errors = by["src/inventory/errors.py"]
    assert errors["verdict"] == "rejected" and errors["gate"] == "coverage"
    assert any(r.startswith("uncovered lines: ") for r in errors["reasons"])
    assert all(r.schema_name is None for r in mistral_server.requests)  # never judged
    assert sorted((e["payload"]["source"], e["payload"]["gate"]) for e in emitted) == [  # type: ignore[index]
        ("src/inventory/errors.py", "coverage"),
        ("src/inventory/reports.py", "static"),
    ]
    assert all(e["resource"]["prefect.resource.id"].startswith("autopilot.file.") for e in emitted)  # type: ignore[index]
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    table = _latest_artifact("nightly-inv")
    rows = {r["file"]: r for r in json.loads(table.data)}
    assert rows["src/inventory/errors.py"]["failed gate"] == "coverage"
    assert rows["src/inventory/reports.py"]["verdict"] == "rejected"
    summary = _latest_artifact("nightly-inv-summary")
    assert "`src/inventory/reports.py`: rejected at static" in str(summary.data)
    assert _latest_artifact("nightly-progress-inv").data == 100.0


def _latest_artifact(key: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    assert found, f"no artifact {key}"
    return found[0]
