"""End-to-end: the post-merge flow on a copy of the Python example with a regression injected.

The report is produced by really running the suite; the model is the scripted server; the
auditor really applies patches in worktrees and re-runs pytest in the sandbox; fixes really land
on a new branch. A person's answer comes through Prefect's RunInput from a thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import SubprocessRunner, git, make_example_repo
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule, error
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow

PRICING = "src/inventory/pricing.py"
FAILING_TEST = "tests/test_pricing.py::test_ten_units_get_five_percent"
#: The same example as the JUnit report's parser names it (file:line).
REPORT_ID = "tests/test_pricing.py:8::test_ten_units_get_five_percent"  # file:line::name


def regressed_repo(tmp_path: Path, plain_pytest: bool = False) -> tuple[Path, Path, str]:
    """The example with a 'merged' regression (5 % became 6 %), and a real report of it.

    `plain_pytest`: the report is pytest's default JUnit XML, as a CI job writes it (no
    ``file`` attribute), rather than the toolchain's.
    """
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    source = repo / PRICING
    source.write_text(source.read_text().replace("(10, 5))", "(10, 6))"))
    git(repo, "commit", "-qam", "Merge: tweak volume discounts")
    head = git(repo, "rev-parse", "HEAD").strip()
    if plain_pytest:
        junit = tmp_path / "ci-junit.xml"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
        ]
        done = SubprocessRunner().run(argv, cwd=repo, env={"PYTHONDONTWRITEBYTECODE": "1"})
        assert done.exit_code == 1, done.stdout
        assert 'file="' not in junit.read_text()
        return repo, junit, head
    reports = tmp_path / "reports"
    result = get_toolchain("python-pytest").run_specs(
        repo, [], None, SubprocessRunner(), reports_dir=reports
    )
    failing = [e.id for e in result.examples if e.status != "passed"]
    assert failing == [FAILING_TEST]
    return repo, reports / "junit.xml", git(repo, "rev-parse", "HEAD").strip()


def diagnosis_json(wrong_side: str = "code", confidence: float = 0.85) -> str:
    return json.dumps(
        {
            "root_cause": "The merge changed the 10-unit volume discount from 5 to 6 percent.",
            "affected_code_blocks": [
                {
                    "file_path": PRICING,
                    "start_line": 8,
                    "end_line": 8,
                    "description": "VOLUME_DISCOUNTS entry for 10 units",
                }
            ],
            "repair_strategy": "Restore the (10, 5) entry in VOLUME_DISCOUNTS.",
            "confidence": confidence,
            "wrong_side": wrong_side,
            "alternatives": [
                {
                    "root_cause": "The test expectation is outdated",
                    "repair_strategy": "Expect 6",
                    "confidence": 0.1,
                }
            ],
        }
    )


def patch_to(percent: int, path: str = PRICING) -> str:
    return (
        "```diff\n"
        f"--- a/{path}\n+++ b/{path}\n"
        "@@ -7,3 +7,3 @@\n"
        " # (minimum quantity, percent off), highest threshold first.\n"
        "-VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, 6))\n"
        f"+VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, {percent}))\n"
        " DEFAULT_TAX_PERCENT = 20\n"
        "```\n"
    )


def is_surgeon(req: RecordedRequest) -> bool:
    return "surgeon of a test-repair system" in req.text


def script(server: MistralServer, surgeon: list[Any], wrong_side: str = "code") -> Rule:
    server.add(Rule(name="diagnose", schema_name="diagnosis", replies=[diagnosis_json(wrong_side)]))
    return server.add(Rule(name="surgeon", when=is_surgeon, replies=surgeon))


def run_flow(repo: Path, report: Path | None, tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    """The flow on `repo` with `report`, or with none: the suite then runs in the sandbox; its
    summary as the CLI's JSON document."""
    from flows.post_merge import post_merge

    return post_merge(
        repo=str(repo),
        reports=[str(report)] if report else None,
        archive=str(tmp_path / "archive"),
        human_poll_s=1,
        **kwargs,
    ).model_dump(mode="json")


def assert_user_tree_untouched(repo: Path, head: str) -> None:
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert "(10, 6))" in (repo / PRICING).read_text()


def branch_file(repo: Path, branch: str, path: str) -> str:
    return git(repo, "show", f"{branch}:{path}")


def archived(tmp_path: Path, run_id: str) -> dict[str, Any]:
    [run_dir] = list((tmp_path / "archive" / "post_merge").glob(f"*/{run_id}"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {"dir": run_dir, "keys": [o["key"] for o in manifest["objects"]]}


def test_fixed_on_the_first_patch_and_committed_on_a_fix_branch(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, head = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)])

    result = run_flow(repo, report, tmp_path)

    assert result["failures"] == 1
    [group] = result["groups"]
    assert (group["outcome"], group["attempts"], group["tests"]) == ("fixed", 1, [REPORT_ID])
    assert group["diagnosis"]["wrong_side"] == "code"
    assert "(10, 5))" in group["patch"]
    branch = result["branch"]
    assert branch == f"autopilot/fix-{head[:7]}"
    assert "(10, 5))" in branch_file(repo, branch, PRICING)
    assert git(repo, "rev-parse", f"{branch}~1").strip() == head  # one commit for one group
    assert git(repo, "log", "-1", "--format=%s", branch).startswith(f"autopilot: fix {group['id']}")
    assert_user_tree_untouched(repo, head)
    m = result["metrics"]
    assert (m["autonomous_fix_rate"], m["human_intervention_rate"]) == (1.0, 0.0)
    assert m["tokens"] > 0 and m["mean_time_to_fix_s"] >= 0
    # The requests carried the failing test's path, its failure and the code it points to.
    diag = next(r for r in mistral_server.requests if r.schema_name == "diagnosis")
    assert "tests/test_pricing.py" in diag.text and "assert 6 == 5" in diag.text
    assert "VOLUME_DISCOUNTS" in diag.text and "tweak volume discounts" in diag.text
    found = archived(tmp_path, result["run_id"])
    keys = found["keys"]
    assert "summary.json" in keys
    calls = json.loads((found["dir"] / "model-calls.json").read_text())
    assert [(c["role"], c["prompt_name"], c["ok"]) for c in calls] == [
        ("diagnostician", "diagnose", True),
        ("surgeon", "surgeon", True),
    ]
    assert sum(c["input_tokens"] + c["output_tokens"] for c in calls) == m["tokens"]
    steps = [k.rsplit("-", 1)[-1] for k in keys if k.startswith(f"groups/{group['id']}/")]
    assert steps == ["context.json", "diagnose.json", "surgeon.json", "audit.json"]
    # Every prompt the models received and every reply they gave, in the archived state.
    audit_key = next(k for k in keys if k.startswith(f"groups/{group['id']}/") and "audit" in k)
    exchanges = json.loads((found["dir"] / audit_key).read_text())["exchanges"]
    assert [e["prompt_name"] for e in exchanges] == ["diagnose", "surgeon"]
    surgeon_request = next(r for r in mistral_server.requests if is_surgeon(r))
    assert [m["content"] for m in exchanges[1]["messages"]] == [
        m["content"] for m in surgeon_request.messages
    ]
    assert "(10, 5))" in exchanges[1]["replies"][0]
    assert json.loads(exchanges[0]["replies"][0])["wrong_side"] == "code"
    assert not any(e["cached"] for e in exchanges)


def test_fixed_on_a_revision_that_carries_the_first_patch_and_its_rerun(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, _, head = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(7), patch_to(5)])

    result = run_flow(repo, None, tmp_path)  # no report: the scout runs the suite itself

    [group] = result["groups"]
    assert group["tests"] == [FAILING_TEST] and result["failures"] == 1
    assert (group["outcome"], group["attempts"]) == ("fixed", 2)
    assert group["reasons"][0].startswith("attempt 1: NEEDS_REVISION: 1 of 1 failing examples")
    surgeon_calls = [r for r in mistral_server.requests if is_surgeon(r)]
    assert len(surgeon_calls) == 2
    revision = surgeon_calls[1].text
    assert "(10, 7))" in revision  # the previous patch
    assert "assert 7 == 5" in revision  # its exact re-run output
    assert "(10, 7))" not in surgeon_calls[0].text
    assert "(10, 5))" in branch_file(repo, result["branch"], PRICING)
    assert_user_tree_untouched(repo, head)


def _answer_when_paused(run_input: dict[str, Any], answered: list[str]) -> threading.Thread:
    """Resume the first paused flow run with `run_input`, from another thread."""

    def answer() -> None:
        from prefect import get_client
        from prefect.flow_runs import resume_flow_run

        deadline = time.monotonic() + 300
        with get_client(sync_client=True) as client:
            while time.monotonic() < deadline:
                for run in client.read_flow_runs():
                    if run.state is not None and run.state.is_paused():
                        resume_flow_run(run.id, run_input=run_input)
                        answered.append(str(run.id))
                        return
                time.sleep(0.3)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


def test_risky_patch_is_handed_to_a_person_and_committed_when_approved(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, head = regressed_repo(tmp_path, plain_pytest=True)
    # The diagnosis blames the test, yet the patch edits production code: RISKY.
    script(mistral_server, [patch_to(5)], wrong_side="test")
    answered: list[str] = []
    thread = _answer_when_paused({"action": "approve", "note": "the code was wrong"}, answered)

    result = run_flow(repo, report, tmp_path, human_timeout=120)
    thread.join(timeout=10)

    assert answered == [result["run_id"]]
    [group] = result["groups"]
    assert group["outcome"] == "fixed"
    assert any("RISKY" in r and "test is wrong" in r for r in group["reasons"])
    assert "approved by a person: the code was wrong" in group["reasons"]
    assert "(10, 5))" in branch_file(repo, result["branch"], PRICING)
    m = result["metrics"]
    assert (m["autonomous_fix_rate"], m["human_intervention_rate"]) == (0.0, 1.0)
    assert_user_tree_untouched(repo, head)


TEST_EDIT = (
    "--- a/tests/test_pricing.py\n+++ b/tests/test_pricing.py\n@@ -8,3 +8,3 @@\n"
    " def test_ten_units_get_five_percent():\n"
    "-    assert volume_discount(10) == 5\n"
    "+    assert volume_discount(10) == 6\n"
    " \n"
)


def test_a_person_can_answer_with_an_edited_patch_which_is_committed_instead(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, head = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)], wrong_side="test")
    answered: list[str] = []
    decision = {"action": "edit", "patch": TEST_EDIT, "note": "6 % is the new policy"}
    thread = _answer_when_paused(decision, answered)

    result = run_flow(repo, report, tmp_path, human_timeout=120)
    thread.join(timeout=10)

    [group] = result["groups"]
    assert group["outcome"] == "fixed"
    assert group["patch"] == TEST_EDIT
    assert "edited by a person: 6 % is the new policy" in group["reasons"]
    branch = result["branch"]
    assert "== 6" in branch_file(repo, branch, "tests/test_pricing.py")
    assert "(10, 6))" in branch_file(repo, branch, PRICING)  # the model's patch was not used
    assert_user_tree_untouched(repo, head)


def test_an_unanswered_hand_off_ends_needs_human_with_its_state_archived(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, head = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)], wrong_side="test")

    result = run_flow(repo, report, tmp_path, human_timeout=2)

    [group] = result["groups"]
    assert group["outcome"] == "needs_human"
    assert "no answer from a person within the human timeout" in group["reasons"]
    assert result["branch"] is None
    assert git(repo, "branch", "--list", "autopilot/*") == ""
    found = archived(tmp_path, result["run_id"])
    human = [k for k in found["keys"] if k.endswith("-human.json")]
    assert len(human) == 1
    state = json.loads((found["dir"] / human[0]).read_text())
    assert state["outcome"] == "needs_human"
    assert state["attempts"][0]["audit"]["verdict"] == "RISKY"
    assert state["diagnoses"][0]["wrong_side"] == "test"
    summary = json.loads((found["dir"] / "summary.json").read_text())
    assert summary["groups"][0]["outcome"] == "needs_human"
    assert_user_tree_untouched(repo, head)
    event = wait_for_event("autopilot.human.needed", f"{result['run_id']}.{group['id']}")
    assert event.payload["group"] == group["id"]
    assert any("RISKY" in r for r in event.payload["reasons"])


def test_a_run_stopped_by_a_model_outage_resumes_from_its_archived_state(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, report, head = regressed_repo(tmp_path)
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    surgeon_rule = script(mistral_server, [error(503, body="model overloaded")])

    first = run_flow(repo, report, tmp_path, human_timeout=0)

    [group] = first["groups"]
    assert group["outcome"] == "needs_human" and first["branch"] is None
    assert group["diagnosis"]["wrong_side"] == "code"  # the diagnosis was paid for
    # The outage is over; the run goes on from its archive, not from the report.
    surgeon_rule.replies = [patch_to(5)]
    diagnoses_before = sum(1 for r in mistral_server.requests if r.schema_name == "diagnosis")

    second = run_flow(repo, None, tmp_path, resume=first["run_id"])

    [group] = second["groups"]
    assert (group["outcome"], group["attempts"]) == ("fixed", 1), group["reasons"]
    assert f"resumed from run {first['run_id']} at step surgeon" in group["reasons"]
    # The surgeon was asked again; the diagnostician was not.
    assert sum(1 for r in mistral_server.requests if r.schema_name == "diagnosis") == (
        diagnoses_before
    )
    assert second["run_id"] != first["run_id"] and second["base_commit"] == head
    assert "(10, 5))" in branch_file(repo, second["branch"], PRICING)
    found = archived(tmp_path, second["run_id"])
    [start] = [k for k in found["keys"] if k.endswith("-resumed.json")]
    assert json.loads((found["dir"] / start).read_text())["resumed_from"] == first["run_id"]
    assert_user_tree_untouched(repo, head)


def test_resuming_a_run_the_archive_does_not_have_is_bad_input(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    from tasks.core.errors import BadInputError

    repo, _, _ = regressed_repo(tmp_path)
    with pytest.raises(BadInputError, match="cannot resume run no-such-run"):
        run_flow(repo, None, tmp_path, resume="no-such-run")


def wait_for_event(name: str, resource_suffix: str) -> Any:
    """The event `name` whose resource id ends with `resource_suffix` (events land async)."""
    from prefect import get_client
    from prefect.events.filters import EventFilter, EventNameFilter

    deadline = time.monotonic() + 30
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            page = client.read_events(EventFilter(event=EventNameFilter(name=[name])), limit=50)
            for event in page.events:
                if event.resource.id.endswith(resource_suffix):
                    return event
            time.sleep(0.5)
    raise AssertionError(f"no {name} event for {resource_suffix}")


def test_cli_json_contract_and_exit_code(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    from prefect.settings import PREFECT_API_URL

    repo, report, _ = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)])
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    argv = [
        sys.executable,
        "-c",
        "from flows.commands.repair import run; import sys, pathlib;"
        f"sys.exit(run(pathlib.Path({str(repo)!r}), [pathlib.Path({str(report)!r})], "
        f"archive={str(tmp_path / 'a')!r}, json_out=True))",
    ]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) >= {
        "run_id",
        "repo",
        "base_commit",
        "branch",
        "archive_uri",
        "failures",
        "groups",
        "metrics",
    }
    assert set(doc["groups"][0]) >= {
        "signature",
        "tests",
        "outcome",
        "attempts",
        "diagnosis",
        "patch",
        "reasons",
    }
    assert set(doc["metrics"]) == {
        "autonomous_fix_rate",
        "human_intervention_rate",
        "mean_time_to_fix_s",
        "tokens",
        "category_shares",
        "outcome_shares",
    }
