"""`autopilot repair` with no model configured: it still scouts, groups, reproduces and reports.

On a copy of the Python example with a regression merged and a report from really running its
suite: each group is re-run at the base commit in the sandbox and ends ``needs_model`` with its
reproduction and signature, the JSON document is printed (exit 1: done, nothing repaired), the
run is archived, and a report that cannot be used is named first while the others are used. A
run left for want of a model goes on from its reproduction once one is configured (the scripted
server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flows.commands.repair import run
from tasks.repair.loop import NEEDS_MODEL
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import (
    PRICING,
    REPORT_ID,
    archived,
    branch_file,
    patch_to,
    regressed_repo,
    run_flow,
    script,
)
from tests.paths import REPO_ROOT
from tests.s3server import s3_bucket_fixture, s3_server_fixture  # noqa: F401

pytestmark = pytest.mark.slow


def _check_needs_model(doc: dict[str, Any]) -> dict[str, Any]:
    """The one group of the regressed example, reproduced and left for a model."""
    assert doc["failures"] == 1
    [group] = doc["groups"]
    assert group["outcome"] == "needs_model"
    assert group["tests"] == [REPORT_ID]
    assert group["signature"].endswith("| src/inventory/pricing.py")
    assert group["attempts"] == 0 and group["patch"] is None and group["diagnosis"] is None
    repro = group["reproduction"]
    assert repro["reproduced"] is True and repro["still_failing"] == [REPORT_ID]
    assert "re-run at the base commit: 0 passed, 1 still fail" in repro["evidence"]
    assert NEEDS_MODEL in group["reasons"]
    assert doc["branch"] is None
    assert doc["metrics"]["outcome_shares"] == {"needs_model": 1.0}
    assert doc["metrics"]["human_intervention_rate"] == 0.0  # nobody was asked
    return group


def test_without_a_model_each_group_is_reproduced_reported_and_archived(
    tmp_path: Path, prefect_harness: None, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    archive = tmp_path / "archive"

    code = run(repo, [report], archive=str(archive), json_out=True)

    out = capsys.readouterr().out
    assert code == 1
    doc = json.loads(out)  # the document is printed on exit 1 too
    group = _check_needs_model(doc)
    assert doc["report_errors"] == []
    found = archived(tmp_path, doc["run_id"])
    keys = found["keys"]
    assert "summary.json" in keys and "model-calls.json" not in keys
    assert json.loads((found["dir"] / "summary.json").read_text())["groups"][0]["outcome"] == (
        "needs_model"
    )
    [step] = [k for k in keys if k.startswith(f"groups/{group['id']}/")]
    assert step.endswith("-reproduced.json")
    state = json.loads((found["dir"] / step).read_text())
    assert state["reproduction"]["reproduced"] is True and state["step"] == "diagnose"


def test_a_missing_report_is_named_first_and_the_others_are_used(
    tmp_path: Path, prefect_harness: None, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    missing = tmp_path / "ci" / "missing.xml"

    code = run(repo, [missing, report], archive=str(tmp_path / "archive"))

    captured = capsys.readouterr()
    assert code == 1
    first = captured.err.splitlines()[0]
    assert first == f"autopilot: warning: report not used: {missing}: no such file"
    table = captured.out.splitlines()
    [row] = [line for line in table if line.startswith("g-")]
    assert REPORT_ID in row and "needs_model" in row and " yes " in row
    assert "src/inventory/pricing.py" in row  # the signature
    assert f"report not used: {missing}: no such file" in table
    assert any(line.startswith("needs a model: ") and "--resume" in line for line in table)


def test_a_run_left_for_want_of_a_model_goes_on_from_its_reproduction_with_one(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)])
    url = mistral_server.url
    monkeypatch.delenv("AUTOPILOT_MODEL_URL")
    monkeypatch.delenv("MISTRAL_API_KEY")

    first = run_flow(repo, report, tmp_path)

    _check_needs_model(first)
    assert mistral_server.requests == []
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", url)
    monkeypatch.setenv("MISTRAL_API_KEY", "test-key-not-real")

    second = run_flow(repo, None, tmp_path, resume=first["run_id"])

    [group] = second["groups"]
    assert (group["outcome"], group["attempts"]) == ("fixed", 1), group["reasons"]
    assert NEEDS_MODEL not in group["reasons"]
    assert f"resumed from run {first['run_id']} after its reproduction" in group["reasons"]
    assert group["reproduction"] == first["groups"][0]["reproduction"]
    assert "(10, 5))" in branch_file(repo, second["branch"], PRICING)


def test_reports_none_of_which_can_be_fetched_are_one_line_and_exit_2(
    tmp_path: Path, prefect_harness: None, s3_bucket: str
) -> None:
    from prefect.settings import PREFECT_API_URL

    repo, _, _ = regressed_repo(tmp_path)
    uris = [f"s3://{s3_bucket}/ci/missing.xml", "s3://no-such-bucket-here/junit.xml"]
    call = (
        "from flows.commands.repair import run; import sys, pathlib;"
        f"sys.exit(run(pathlib.Path({str(repo)!r}), {uris!r}, "
        f"archive={str(tmp_path / 'a')!r}, json_out=True))"
    )
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    done = subprocess.run(
        [sys.executable, "-c", call],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("autopilot:")]
    assert line.startswith("autopilot: error: no usable report: ")
    assert f"{uris[0]}: no such object" in line and f"{uris[1]}: no such bucket" in line
