"""The audit: per-file results from real suite runs, in a Prefect flow, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.audit.baseline import specs_failing_to_load
from tasks.audit.report import build_report, spec_outcomes
from tasks.core.types import (
    FileCoverage,
    MappedFile,
    Mapping,
    StaticVerdict,
    TestCaseResult,
    ValidationResult,
)
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git, make_example_repo

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))


def _case(file: str, status: str) -> TestCaseResult:
    return TestCaseResult(id=f"{file}[1:1]", name="x", file=file, status=status)  # type: ignore[arg-type]


def test_build_report_statuses_summary_and_coverage() -> None:
    mapping = Mapping(
        toolchain="ruby-rspec",
        files=[
            MappedFile(
                source="app/models/a.rb",
                kind="model",
                specs=["spec/a_spec.rb"],
                expected_spec="spec/a_spec.rb",
            ),
            MappedFile(
                source="app/models/b.rb",
                kind="model",
                specs=["spec/b_spec.rb"],
                expected_spec="spec/b_spec.rb",
            ),
            MappedFile(
                source="lib/c.rb",
                kind="ruby",
                specs=[],
                expected_spec="spec/lib/c_spec.rb",
            ),
            MappedFile(
                source="app/models/d.rb",
                kind="model",
                specs=["spec/d_spec.rb"],
                expected_spec="spec/d_spec.rb",
            ),
        ],
        untested=["lib/c.rb"],
    )
    suite = ValidationResult(
        toolchain="ruby-rspec",
        loaded=True,
        examples=[
            _case("./spec/a_spec.rb", "passed"),
            _case("spec/b_spec.rb", "failed"),
            _case("spec/b_spec.rb", "passed"),
        ],
    )
    coverage = {
        "app/models/a.rb": FileCoverage(
            path="app/models/a.rb", executable_lines=10, covered_lines=10
        ),
        "app/models/b.rb": FileCoverage(
            path="app/models/b.rb",
            executable_lines=10,
            covered_lines=5,
            uncovered_lines=[1, 2, 3, 4, 5],
        ),
        "lib/c.rb": FileCoverage(
            path="lib/c.rb",
            executable_lines=20,
            covered_lines=0,
            uncovered_lines=list(range(1, 21)),
        ),
    }
    report = build_report(
        repo="r",
        commit="c" * 40,
        mapping=mapping,
        suite=suite,
        coverage=coverage,
        broken_specs={"spec/d_spec.rb": "timeout after 5s"},
        lint=[],
        static={
            "spec/a_spec.rb": StaticVerdict(score=0.5),
            "spec/b_spec.rb": StaticVerdict(score=1),
        },
    )
    by = {f.source: f for f in report.files}
    assert by["app/models/a.rb"].status == "tested"
    assert by["app/models/a.rb"].static_score == 0.5
    assert by["app/models/b.rb"].status == "failing"
    assert by["app/models/b.rb"].uncovered_lines == [1, 2, 3, 4, 5]
    assert by["lib/c.rb"].status == "untested" and by["lib/c.rb"].coverage == 0.0
    assert by["app/models/d.rb"].status == "failing"  # its spec could not run
    assert by["app/models/d.rb"].reason == "spec/d_spec.rb: timeout after 5s"
    assert by["app/models/a.rb"].reason is None
    s = report.summary
    assert (s.files, s.untested, s.specs_passing, s.specs_failing) == (4, 1, 1, 2)
    assert s.line_coverage == pytest.approx(15 / 40)


def test_load_errors_name_the_broken_files() -> None:
    rspec = ValidationResult(
        toolchain="ruby-rspec",
        loaded=False,
        load_error="An error occurred while loading ./spec/models/customer_spec.rb.\n"
        "SyntaxError: ...\nAn error occurred while loading ./spec/lib/x_spec.rb.",
    )
    assert specs_failing_to_load(get_toolchain("ruby-rspec"), rspec) == [
        "spec/models/customer_spec.rb",
        "spec/lib/x_spec.rb",
    ]
    pytest_err = ValidationResult(
        toolchain="python-pytest",
        loaded=False,
        load_error="ERROR collecting tests/test_stock.py\nE   SyntaxError",
    )
    assert specs_failing_to_load(get_toolchain("python-pytest"), pytest_err) == [
        "tests/test_stock.py"
    ]
    assert (
        specs_failing_to_load(
            get_toolchain("ruby-rspec"), ValidationResult(toolchain="ruby-rspec", loaded=True)
        )
        == []
    )
    assert spec_outcomes(rspec, ["spec/x_spec.rb"]) == {"spec/x_spec.rb": False}


def _status(repo: Path) -> tuple[str, str, list[str]]:
    return (
        git(repo, "status", "--porcelain", "--ignored"),
        git(repo, "rev-parse", "HEAD"),
        sorted(p.name for p in repo.iterdir()),
    )


@pytest.mark.slow
def test_audit_flow_on_rails_app_with_a_broken_spec(tmp_path: Path, prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.audit import audit

    repo = make_example_repo("rails_shop", tmp_path / "shop")
    (repo / "spec/models/customer_spec.rb").write_text(
        'require "rails_helper"\nRSpec.describe Customer do\n  it "x" do\n'
        "    expect(Customer.new.name).to eq(nil\n  end\nend\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken spec")
    before = _status(repo)

    report = audit(repo=str(repo), ref="HEAD")

    by = {f.source: f for f in report.files}
    assert by["app/models/customer.rb"].status == "failing"
    # The broken file did not hide the others: the shipped specs ran and passed.
    assert by["app/helpers/price_helper.rb"].status == "tested"
    assert by["app/helpers/price_helper.rb"].coverage == 1.0
    assert by["app/models/order.rb"].status == "untested"
    assert report.summary.specs_failing == 1
    assert report.summary.specs_passing == 5
    assert 0 < report.summary.line_coverage < 1
    assert _status(repo) == before  # the user's checkout is untouched

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["audit-shop"]))
        )
    assert arts and arts[0].type == "table"
    rows = json.loads(arts[0].data) if isinstance(arts[0].data, str) else arts[0].data
    assert {r["file"] for r in rows} == set(by)


@pytest.mark.slow
def test_audit_cli_json_on_python_package(tmp_path: Path, prefect_harness: None) -> None:
    from prefect.settings import PREFECT_API_URL

    repo = make_example_repo("py_inventory", tmp_path / "inv")
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    done = subprocess.run(
        [AUTOPILOT, "audit", "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # The documented keys, plus (README) suite, prepared, errors, warnings, failing_tests.
    assert set(doc) == {
        *("repo", "commit", "toolchain", "summary", "files"),
        *("suite", "prepared", "errors", "warnings", "failing_tests"),
    }
    assert doc["failing_tests"] == []
    assert doc["suite"] == {"ran": True, "problem": None, "set_aside": {}}
    assert set(doc["summary"]) == {
        "files",
        "untested",
        "line_coverage",
        "specs_passing",
        "specs_failing",
        "specs_not_run",
        "tests",
    }
    assert doc["summary"]["tests"].pop("duration") >= 0
    assert doc["summary"]["tests"] == {
        "tests": 11,
        "passed": 11,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "duplicates": 0,
    }
    assert doc["toolchain"] == "python-pytest"
    f = doc["files"][0]
    assert set(f) == {
        "source",
        "kind",
        "specs",
        "status",
        "coverage",
        "uncovered_lines",
        "static_score",
        "findings",
        "lint_offenses",
        "reason",
        "covered_by",
        "tests",
        "failing_tests",
    }
    assert doc["summary"]["specs_failing"] == 0
    assert doc["summary"]["untested"] == sum(1 for f in doc["files"] if f["status"] == "untested")


@pytest.mark.parametrize("case", ["missing", "not-git", "bad-ref"])
def test_audit_cli_bad_input_is_one_line_exit_2(tmp_path: Path, case: str) -> None:
    repo = tmp_path / "r"
    args = ["--repo", str(repo)]
    if case == "not-git":
        repo.mkdir()
    elif case == "bad-ref":
        make_example_repo("py_inventory", repo)
        args += ["--ref", "no-such-branch"]
    done = subprocess.run([AUTOPILOT, "audit", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autopilot: error:"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_audit_contains_a_hanging_spec_and_reports_the_rest(
    tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.audit import audit

    monkeypatch.setenv("AUTOPILOT_SANDBOX__TIMEOUT_S", "40")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__SPEC_TIMEOUT_S", "15")
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    (repo / "spec/models/order_spec.rb").write_text(
        'require "rails_helper"\nRSpec.describe Order do\n'
        '  it "waits forever" do\n    sleep\n    expect(1).to eq(1)\n  end\nend\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hanging spec")

    report = audit(repo=str(repo), ref="HEAD")

    by = {f.source: f for f in report.files}
    order = by["app/models/order.rb"]
    assert order.status == "failing"
    assert order.reason is not None and "timeout" in order.reason
    assert by["app/helpers/price_helper.rb"].status == "tested"
    assert by["app/helpers/price_helper.rb"].coverage == 1.0
    assert report.summary.specs_passing == 5 and report.summary.specs_failing == 1
