"""The whole-branch proof (`suite` gate) on a copy of examples/py_inventory, with a scripted
model: two specs that pass alone but break each other together; one is dropped, the other is
committed, and the proof's runs are in the report and the archive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands.nightly import run
from tasks.core.types import TestCaseResult, ValidationResult
from tasks.generate.suite_gate import new_failures
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.commands.test_nightly import ERRORS_TEST
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

# Passes alone; leaves the reports module's formatter replaced (global state), so the reports
# spec, run after it in the same process, fails.
LEAKY_ERRORS_TEST = (
    "import inventory.reports as reports\n"
    + ERRORS_TEST
    + """

def test_unknown_item_error_message_is_stable_in_reports():
    reports.format_cents = lambda cents: "n/a"  # leaks: never restored
    assert str(UnknownItemError("B2")) == "unknown item 'B2'"
"""
)


@pytest.mark.slow
def test_specs_that_break_each_other_together_drop_one_at_the_suite_gate(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[files_reply(GOOD)]))
    mistral_server.add(
        Rule(
            about="src/inventory/errors.py",
            replies=[files_reply(LEAKY_ERRORS_TEST, "tests/test_errors.py")],
        )
    )
    only = ["src/inventory/reports.py", "src/inventory/errors.py"]

    code = run(repo, only=only, json_out=True, archive=str(tmp_path / "arch"))

    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    files = {f["source"]: f for f in doc["files"]}
    dropped = files["src/inventory/reports.py"]
    assert (dropped["verdict"], dropped["gate"]) == ("rejected", "suite")
    assert dropped["reasons"][0].startswith("passes alone but fails together with the suite")
    assert "test_summary_counts_and_formats" in dropped["reasons"][0]
    assert files["src/inventory/errors.py"]["verdict"] == "accepted"
    branch = doc["branch"]
    assert git(repo, "show", f"{branch}:tests/test_errors.py") == LEAKY_ERRORS_TEST
    listed = git(repo, "ls-tree", "-r", "--name-only", branch).split()
    assert "tests/test_reports.py" not in listed
    # The user's checkout is untouched by the proof's writes.
    assert not (repo / "tests/test_errors.py").exists()
    run_dir = Path(doc["archive_uri"].removeprefix("file://"))
    proof = json.loads((run_dir / "suite.json").read_text())
    # One round that failed at its second run (the new files first passes; reversed, the
    # leaky test runs before the one it breaks), then a clean round of two runs.
    assert proof["runs"] == 4 and proof["seconds"] > 0
    assert proof["proved"] == ["src/inventory/errors.py"]
    assert list(proof["dropped"]) == ["src/inventory/reports.py"]
    assert "whole-branch proof" in (run_dir / "summary.md").read_text()


def _case(id_: str, status: str, file: str | None = None) -> TestCaseResult:
    return TestCaseResult(id=id_, name=id_.split("::")[-1], file=file, status=status)  # type: ignore[arg-type]


def test_new_failures_leave_out_what_already_failed_in_the_baseline() -> None:
    before = [_case("t/a.py::x", "failed", "t/a.py"), _case("t/a.py::y", "passed", "t/a.py")]
    after = ValidationResult(
        toolchain="python-pytest",
        loaded=True,
        examples=[
            _case("t/a.py::x", "failed", "t/a.py"),
            _case("t/a.py::y", "error", "t/a.py"),
            _case("t/b.py::z", "passed", "t/b.py"),
        ],
    )
    assert [c.id for c in new_failures(after, before)] == ["t/a.py::y"]


_SUITE_CALC = "def double(x):\n    return x * 2\n"
_SUITE_OLD_FAILING = "def test_known_broken():\n    assert 1 == 2\n"
_SUITE_NEW = "from calc import double\n\n\ndef test_doubles():\n    assert double(2) == 4\n"
#: An existing test that leaves a mark behind (it runs after the new files in the first run).
_SUITE_ORDER = """\
import builtins


def test_leaves_a_mark():
    builtins._suite_mark = True
"""
#: A new test that fails once the mark is there: only in the reversed run.
_SUITE_MARKS = (
    _SUITE_NEW
    + "\n\ndef test_no_mark_yet():\n    import builtins\n\n"
    + "    assert not getattr(builtins, '_suite_mark', False)\n"
)


@pytest.mark.parametrize("new_text", [_SUITE_NEW, _SUITE_MARKS])
def test_a_failure_the_baseline_had_does_not_end_the_proof(tmp_path: Path, new_text: str) -> None:
    """The suite already fails (a known broken test): the proof still makes both runs, the
    second reversed, and only a failure the baseline did not have rejects the new file."""
    from tasks.core.config import SandboxSettings
    from tasks.generate.suite_gate import SUITE_RUNS, prove_together
    from tasks.generate.types import FileOutcome
    from tasks.sandbox.make import make_runner
    from tasks.toolchains.registry import get_toolchain

    chain = get_toolchain("python-pytest")
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text(_SUITE_CALC, encoding="utf-8")
    (tmp_path / "tests" / "test_old.py").write_text(_SUITE_OLD_FAILING, encoding="utf-8")
    (tmp_path / "tests" / "test_order.py").write_text(_SUITE_ORDER, encoding="utf-8")
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=tmp_path)
    baseline = chain.run_specs(tmp_path, [], None, runner, coverage=False)
    assert [e.status for e in baseline.examples if e.file == "tests/test_old.py"] == ["failed"]
    out = FileOutcome(
        source="calc.py",
        kind="module",
        spec="tests/test_new.py",
        verdict="accepted",
        files={"tests/test_new.py": new_text},
    )
    proof = prove_together(tmp_path, chain, runner, [out], baseline, timeout_s=120)
    if new_text == _SUITE_NEW:
        assert proof.runs == SUITE_RUNS and proof.proved == ["calc.py"]
        assert out.verdict == "accepted"
    else:  # only the reversed run breaks the new file
        assert proof.runs == SUITE_RUNS and list(proof.dropped) == ["calc.py"]
        assert "test_new.py::test_no_mark_yet" in proof.dropped["calc.py"]
        assert out.verdict == "rejected" and out.gate == "suite"
    assert not (tmp_path / "tests" / "test_new.py").exists()  # taken out again
