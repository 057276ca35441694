"""Memory across runs, end to end: five real runs over a changing copy of examples/py_inventory,
against a real `prefect server` on loopback, the scripted model server and the real sandbox.

1. nightly at commit A: reports.py accepted, errors.py rejected at the coverage gate;
2. nightly at commit B (another file changed): errors.py skipped by memory, with the reason, and
   never sent to the model;
3. nightly at commit C (errors.py's source changed): errors.py tried again, and accepted;
4. repair at commit D (a regression) with two CI shards' reports: the failing test that both
   report is one test, repaired once; a test that passed in one shard and failed in the other
   at that commit is quarantined as flaky, never sent to the model;
5. repair at commit D with a third shard's report, minutes later: its failure signature is the
   first repair's (merged, never sent to the model), and the run is a shard of the first;
6. repair at commit E (the regression still on main): the signature seen before comes to the
   diagnostician and the surgeon with its earlier outcome.

Then: the history artifact (the trend table with the shards merged, the quarantine, the PNG
chart as a data URI), ``autopilot history`` (a real process: tables, ``--json``, ``--test``,
``--chart``), and the run's Artifacts page and the artifact's own page in headless Chromium
(screenshots into docs/ with AUTOPILOT_UPDATE_DOCS=1, with the chart for the README).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tasks.toolchains.registry import get_toolchain
from tests.conftest import REPO_ROOT
from tests.examples_repo import SubprocessRunner, git, make_example_repo
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule
from tests.flows.commands.test_nightly import ERRORS_TEST
from tests.flows.test_post_merge import PRICING, REPORT_ID, diagnosis_json, is_surgeon, patch_to
from tests.flows.test_ui_browser import CHROMEDRIVER, CHROMIUM, _browser
from tests.infra.test_infra import PrefectServer, running_server
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply
from tests.tasks.history.conftest import postgres_server as postgres_server  # fixture
from tests.tasks.history.conftest import postgres_url

pytestmark = [pytest.mark.slow, pytest.mark.own_prefect_server]

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))
REPORTS, ERRORS = "src/inventory/reports.py", "src/inventory/errors.py"
FLAKY = "tests/test_stock.py::test_needs_reorder"
PARTIAL_ERRORS = ERRORS_TEST.split("def test_insufficient_stock")[0].rstrip() + "\n"
DOCS = REPO_ROOT / "docs"


@dataclass
class Story:
    repo: Path
    home: Path
    server: PrefectServer
    nightly: list[Any] = field(default_factory=list)
    repairs: list[Any] = field(default_factory=list)
    flow_runs: list[Any] = field(default_factory=list)
    requests: list[list[RecordedRequest]] = field(default_factory=list)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-memory"))


@pytest.fixture(scope="module")
def story(server: PrefectServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    tmp = tmp_path_factory.mktemp("memory")
    with pytest.MonkeyPatch.context() as mp, MistralServer() as model:
        mp.setenv("AUTOPILOT_MODEL_URL", model.url)
        mp.setenv("MISTRAL_API_KEY", "test-key-not-real")
        mp.setenv("AUTOPILOT_HOME", str(tmp / "home"))
        for name, value in {
            "GATES__FLAKY_RUNS": "1",
            "GATES__MIN_COVERAGE_GAIN": "1.0",
            "GATES__MAX_MUTANTS": "0",
            "MODEL__JUDGE_SAMPLES": "1",
            "HISTORY__SKIP_AFTER": "1",
            "HISTORY__SKIP_NIGHTS": "2",
        }.items():
            mp.setenv(f"AUTOPILOT_{name}", value)
        story = Story(make_example_repo("py_inventory", tmp / "inv"), tmp / "home", server)
        _script(model)
        with _on(server):
            _nightlies(story, model, tmp)
            _repairs(story, model, tmp)
        yield story


def _on(server: PrefectServer) -> Any:
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    updates: dict[Any, Any] = {
        PREFECT_API_URL: server.api_url,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None,
    }
    return temporary_settings(updates=updates)


def _script(model: MistralServer) -> None:
    model.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    model.add(Rule(about=REPORTS, replies=[files_reply(GOOD)]))
    # First a test that leaves errors.py's lines uncovered (the coverage gate), later a good one.
    errors = [files_reply(PARTIAL_ERRORS, "tests/test_errors.py")]
    model.add(
        Rule(about=ERRORS, replies=[*errors, files_reply(ERRORS_TEST, "tests/test_errors.py")])
    )
    model.add(Rule(name="diagnose", schema_name="diagnosis", replies=[diagnosis_json()]))
    model.add(Rule(name="surgeon", when=is_surgeon, replies=[patch_to(5)]))


def _edit(repo: Path, path: str, old: str, new: str, message: str) -> None:
    file = repo / path
    text = file.read_text()
    assert old in text, (path, old)
    file.write_text(text.replace(old, new, 1))
    git(repo, "commit", "-qam", message)


def _nightlies(story: Story, model: MistralServer, tmp: Path) -> None:
    from flows.nightly import nightly

    edits = [
        None,
        ("src/inventory/units.py", '"""', '"""Units. ', "B: another file changes"),
        (ERRORS, '"""', '"""Errors. ', "C: errors.py changes"),
    ]
    for edit in edits:
        if edit is not None:
            _edit(story.repo, *edit)
        before = len(model.requests)
        state = nightly(
            repo=str(story.repo),
            only=[REPORTS, ERRORS],
            max_iterations=1,
            archive=str(tmp / "archive"),
            return_state=True,
        )
        story.nightly.append(state.result())
        story.flow_runs.append(state.state_details.flow_run_id)
        story.requests.append(model.requests[before:])


def _shard_reports(story: Story, tmp: Path) -> list[Path]:
    """Commit D (a regression), and three CI jobs' reports of it: the first as the suite ran,
    the second with one more test failing there (a flake), the third like the first but for its
    timings (another job of the matrix)."""
    _edit(story.repo, PRICING, "(10, 5))", "(10, 6))", "D: tweak volume discounts")
    out = tmp / "reports"
    get_toolchain("python-pytest").run_specs(
        story.repo, [], None, SubprocessRunner(), reports_dir=out
    )
    junit = (out / "junit.xml").read_text()
    flaky = re.sub(
        r'(<testcase classname="tests.test_stock" name="test_needs_reorder"[^>]*?) />',
        r'\1><failure message="TimeoutError: the reorder service did not answer">'
        r"tests/test_stock.py:25: TimeoutError</failure></testcase>",
        junit,
    )
    assert flaky != junit
    shards = [tmp / "shard-1.xml", tmp / "shard-2.xml", tmp / "shard-3.xml"]
    other_job = junit.replace('time="0.00', 'time="0.01')  # another job's timings
    assert other_job != junit
    for path, text in zip(shards, [junit, flaky, other_job], strict=True):
        path.write_text(text)
    return shards


def _repairs(story: Story, model: MistralServer, tmp: Path) -> None:
    from flows.post_merge import post_merge

    shards = _shard_reports(story, tmp)
    for reports in ([shards[0], shards[1]], [shards[2]], [shards[0]]):
        if len(story.repairs) == 2:
            _edit(story.repo, "src/inventory/units.py", '"""', '"""E. ', "E: later")
        before = len(model.requests)
        state = post_merge(
            repo=str(story.repo),
            reports=[str(r) for r in reports],
            archive=str(tmp / "archive"),
            human_poll_s=1,
            return_state=True,
        )
        story.repairs.append(state.result().model_dump(mode="json"))
        story.flow_runs.append(state.state_details.flow_run_id)
        story.requests.append(model.requests[before:])


def _about(requests: list[RecordedRequest], path: str) -> list[RecordedRequest]:
    return [r for r in requests if path in r.text]


def test_a_rejected_file_is_skipped_while_unchanged_and_tried_again_when_it_changes(
    story: Story,
) -> None:
    first, second, third = ({f.source: f for f in n.files} for n in story.nightly)
    assert (first[REPORTS].verdict, first[ERRORS].verdict, first[ERRORS].gate) == (
        "accepted",
        "rejected",
        "coverage",
    )
    assert _about(story.requests[0], ERRORS)

    skipped = second[ERRORS]
    assert skipped.verdict == "skipped" and skipped.tokens == 0
    [reason] = skipped.reasons
    run_one = story.nightly[0].run_id
    assert reason.startswith("skipped by memory (1 of 2): rejected at the coverage gate (last ")
    assert reason.endswith(
        f"run {run_one[:8]}) with unchanged source, skill and prompts: {first[ERRORS].reasons[0]}"
    )
    assert _about(story.requests[1], ERRORS) == []  # no model call for it that night
    assert story.nightly[1].exit_code() == 1  # a remembered rejection still is one

    assert third[ERRORS].verdict == "accepted"  # its source changed: tried, and it passed
    assert _about(story.requests[2], ERRORS)


def test_shards_merge_into_one_run_and_a_flaky_test_is_quarantined(story: Story) -> None:
    one, two, _ = story.repairs
    groups = {g["category"]: g for g in one["groups"]}
    assert set(groups) == {"code-side", "flaky"}
    fixed = groups["code-side"]
    # Both shards reported the regression: one test, one group, repaired once.
    assert (fixed["outcome"], fixed["tests"]) == ("fixed", [REPORT_ID])
    assert "(10, 5))" in git(story.repo, "show", f"{one['branch']}:{PRICING}")
    flaky = groups["flaky"]
    assert flaky["outcome"] == "needs_human" and flaky["attempts"] == 0 and flaky["patch"] is None
    assert flaky["tests"] == ["tests/test_stock.py:24::test_needs_reorder"]
    [why] = flaky["reasons"]
    assert why.startswith("quarantined as flaky by the run history, never repaired: ")
    assert re.search(
        r"flipped at commit \w{12}: passed in run \w{8} \(ci-report, .*\); "
        r"failed in run \w{8} \(ci-report, ",
        why,
    ), why
    asked = story.requests[3]
    assert [r.schema_name for r in asked].count("diagnosis") == 1
    assert not _about(asked, "test_needs_reorder")  # never sent to the model
    assert "shard_of" not in one and "merged" not in one

    # The third shard, minutes later: the same signature is the first run's.
    assert two["groups"] == [] and two["branch"] is None
    assert two["shard_of"] == one["run_id"]
    assert two["merged"] == [
        {
            "id": fixed["id"],
            "signature": fixed["signature"],
            "tests": [REPORT_ID],
            "run_id": one["run_id"],
        }
    ]
    assert story.requests[4] == []


def test_a_signature_seen_before_comes_with_its_earlier_outcome(story: Story) -> None:
    first, later = story.repairs[0], story.repairs[2]
    [group] = later["groups"]
    assert group["signature"] == next(
        g["signature"] for g in first["groups"] if g["category"] == "code-side"
    )
    asked = story.requests[5]
    diagnose = next(r for r in asked if r.schema_name == "diagnosis")
    surgeon = next(r for r in asked if is_surgeon(r))
    heading = "## Earlier outcomes of this failure signature in this repository"
    for request in (diagnose, surgeon):
        earlier = request.text.split(heading, 1)[1]
        assert earlier.split("\n", 2)[1].endswith(
            "fixed after 1 attempt(s); a person's decision: none"
        ), earlier[:300]
    assert heading not in next(r.text for r in story.requests[3] if r.schema_name == "diagnosis")


def _history_artifacts(story: Story) -> list[Any]:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with _on(story.server), get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["history-inv"]))
        )
    return sorted(found, key=lambda a: a.created)


def _chart_of(markdown: str) -> bytes:
    m = re.search(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert m is not None, "no chart in the artifact"
    return base64.b64decode(m.group(1))


def test_every_run_publishes_the_trend_with_the_quarantine_and_a_chart(story: Story) -> None:
    artifacts = _history_artifacts(story)
    assert len(artifacts) == 6  # one per run
    assert {str(a.flow_run_id) for a in artifacts} == {str(r) for r in story.flow_runs}
    second = str(artifacts[1].data)
    assert (
        "## Skipped by memory" in second and f"| {ERRORS} | coverage | skipped by memory" in second
    )
    last = str(artifacts[-1].data)
    trend = last.split("## Trend", 1)[1].split("##", 1)[0]
    rows = [line for line in trend.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[2] for r in rows] == [
        "nightly",
        "nightly",
        "nightly",
        "post-merge (2 shards)",
        "post-merge",
    ]
    nightly_one = rows[0].split(" | ")
    assert nightly_one[6:8] == ["1", "1"]  # accepted, rejected
    repair = rows[3].split(" | ")
    assert repair[8:10] == ["50%", "0%"]  # autonomous fix rate, human intervention rate
    assert f"| {FLAKY} | flipped at commit " in last
    seen = last.split("## Repair signatures seen before", 1)[1].split("##", 1)[0]
    assert "| fixed after 1 attempt(s) on " in seen and story.repairs[0]["run_id"][:8] in seen
    chart = _chart_of(last)
    assert chart[:8] == b"\x89PNG\r\n\x1a\n" and len(chart) > 20_000


def _autopilot(story: Story, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AUTOPILOT_HOME": str(story.home)}
    return subprocess.run(
        [AUTOPILOT, "history", "--repo", str(story.repo), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_history_command_prints_the_trend_the_quarantine_and_a_test(
    story: Story, tmp_path: Path
) -> None:
    done = _autopilot(story, "--json", "--test", "tests/test_stock.py:24::test_needs_reorder")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) == {"store", "repo", "runs", "quarantined", "skipped", "test"}
    assert doc["store"] == f"sqlite:///{story.home}/history.sqlite3"
    assert doc["repo"] == str(story.repo)
    assert [(p["flow"], p["shards"]) for p in doc["runs"]] == [
        ("nightly", 1),
        ("nightly", 1),
        ("nightly", 1),
        ("post-merge", 2),
        ("post-merge", 1),
    ]
    assert doc["runs"][0]["by_kind"] == {"python": {"accepted": 1, "rejected": 1}}
    assert doc["runs"][3]["groups"] == 2 and doc["runs"][3]["fixed_autonomously"] == 1
    assert [q["test_key"] for q in doc["quarantined"]] == [FLAKY]
    assert doc["skipped"] == []  # the last nightly skipped nothing
    test = doc["test"]
    assert test["test"] == FLAKY and test["quarantine"]["commit"] == story.repairs[0]["base_commit"]
    statuses = {(r["source"], r["status"], r["commit"][:7]) for r in test["results"]}
    head = story.repairs[0]["base_commit"][:7]
    assert {("ci-report", "failed", head), ("ci-report", "passed", head)} <= statuses
    assert {r["source"] for r in test["results"]} == {"ci-report", "baseline"}

    chart = tmp_path / "trend.png"
    plain = _autopilot(story, "--chart", str(chart))
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0] == f"History of {story.repo} (5 runs)"
    assert "Quarantined as flaky (never sent to repair)" in lines
    assert any(line.startswith(FLAKY) and "flipped at commit" in line for line in lines)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_runs_artifacts_page_shows_the_trend_chart_in_chromium(
    story: Story, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    artifact = _history_artifacts(story)[-1]
    monkeypatch.setenv("SE_OFFLINE", "true")  # never let Selenium Manager reach the network
    driver = _browser(tmp_path / "chromium-profile")
    run_page, artifact_page = tmp_path / "run.png", tmp_path / "artifact.png"
    try:
        body = lambda d: d.find_element(By.TAG_NAME, "body").text  # noqa: E731
        driver.get(f"{story.server.url}/runs/flow-run/{artifact.flow_run_id}")
        tab = WebDriverWait(driver, 120).until(
            lambda d: d.find_element(
                By.XPATH, "//li[contains(@class, 'p-tab')][normalize-space(.)='Artifacts']"
            )
        )
        tab.click()
        WebDriverWait(driver, 120).until(lambda d: "MARKDOWN\nhistory-inv" in body(d))
        driver.save_screenshot(str(run_page))
        driver.get(f"{story.server.url}/artifacts/artifact/{artifact.id}")
        WebDriverWait(driver, 120).until(lambda d: "Quarantined as flaky" in body(d))
        img = WebDriverWait(driver, 60).until(
            lambda d: next(
                (
                    i
                    for i in d.find_elements(By.TAG_NAME, "img")
                    if (i.get_attribute("src") or "").startswith("data:image/png")
                    and d.execute_script("return arguments[0].naturalWidth", i) > 0
                ),
                None,
            )
        )
        assert driver.execute_script("return arguments[0].naturalWidth", img) == 1200
        assert FLAKY in body(driver) and "post-merge (2 shards)" in body(driver)
        driver.execute_script("arguments[0].scrollIntoView()", img)
        driver.save_screenshot(str(artifact_page))
    finally:
        driver.quit()
    for shot in (run_page, artifact_page):
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("AUTOPILOT_UPDATE_DOCS") == "1":
        shutil.copyfile(run_page, DOCS / "history-run.png")
        shutil.copyfile(artifact_page, DOCS / "history-artifact.png")
        (DOCS / "trend.png").write_bytes(_chart_of(str(artifact.data)))


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def _nightly_cli(
    server: PrefectServer, repo: Path, home: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in server.env().items() if not k.startswith(("AUTOPILOT_", "MISTRAL_"))}
    env |= {"AUTOPILOT_HOME": str(home), "AUTOPILOT_HISTORY__LOCK_TIMEOUT_S": "0.5", **extra}
    argv = [AUTOPILOT, "nightly", "--repo", str(repo), "--only", REPORTS, "--json"]
    argv += ["--archive", str(home / "archive")]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("fault", ["corrupted", "locked"])
def test_a_corrupted_or_locked_store_is_one_line_and_the_run_goes_on_without_memory(
    server: PrefectServer, tmp_path: Path, fault: str
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    home = tmp_path / "home"
    store = home / "history.sqlite3"
    holder = None
    if fault == "corrupted":
        home.mkdir()
        store.write_bytes(b"\x00garbage, not a database\n" * 500)
        why = "file is not a database"
    else:
        assert _nightly_cli(server, repo, home).returncode == 0  # a store with one run
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        why = "database is locked"
    try:
        done = _nightly_cli(server, repo, home)
    finally:
        if holder is not None:
            holder.communicate("")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the run's result, whole
    assert [f["reasons"] for f in doc["files"]] == [["no model configured"]]
    assert (Path(doc["archive_uri"]) / "summary.json").is_file()
    lines = [line for line in done.stderr.splitlines() if "history" in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].endswith(
        f"WARNING flows.memory: history: sqlite:///{store}: {why}; this run goes on without memory"
    )
    assert "Traceback" not in done.stderr
    spooled = home / "history-spool" / f"{doc['run_id']}.json"
    assert spooled.is_file()  # never a lost result: kept for a later run

    if fault == "corrupted":
        store.rename(store.with_suffix(".broken"))  # what the operator does
    again = _nightly_cli(server, repo, home)
    assert again.returncode == 0 and "history" not in again.stderr, again.stderr
    assert not spooled.exists()
    listed = subprocess.run(
        [AUTOPILOT, "history", "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "AUTOPILOT_HOME": str(home)},
        timeout=300,
    )
    run_ids = [p["run_id"] for p in json.loads(listed.stdout)["runs"]]
    assert doc["run_id"] in run_ids and json.loads(again.stdout)["run_id"] in run_ids
    assert len(run_ids) == (2 if fault == "corrupted" else 3)


def test_workers_sharing_a_postgresql_store_see_each_others_runs(
    server: PrefectServer, postgres_server: object, tmp_path: Path
) -> None:
    """Two workers (two homes, two clones of one repository with the same origin) write to one
    real PostgreSQL store through ``AUTOPILOT_HISTORY__URL``; each sees both runs."""
    url = postgres_url(postgres_server)
    origin = make_example_repo("py_inventory", tmp_path / "origin")
    clones = []
    for name in ("worker-1", "worker-2"):
        clone = tmp_path / name / "inv"
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        clones.append(clone)
    runs = []
    for clone in clones:
        done = _nightly_cli(server, clone, clone.parent / "home", AUTOPILOT_HISTORY__URL=url)
        assert done.returncode == 0 and "history" not in done.stderr, done.stderr
        runs.append(json.loads(done.stdout)["run_id"])
    env = {**os.environ, "AUTOPILOT_HOME": str(tmp_path / "worker-1" / "home")}
    env["AUTOPILOT_HISTORY__URL"] = url
    listed = subprocess.run(
        [AUTOPILOT, "history", "--repo", str(clones[0]), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["repo"] == str(origin)  # named by its origin, not by either clone's path
    assert doc["store"].startswith("postgresql:///history_") and "password" not in doc["store"]
    assert [p["run_id"] for p in doc["runs"]] == runs
    assert not (tmp_path / "worker-1" / "home" / "history.sqlite3").exists()
