"""A hand-off under a deployment suspends the run (its process exits: the worker is free); the
resumed run starts the flow again, reopens its own archived state at the hand-off, takes the
person's decision and finishes, without the scout or the model running again.

A real Prefect server on loopback, the post-merge flow served by a real runner in a
subprocess, the scripted model server, the real sandboxed audit and a real fix branch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.examples_repo import git
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import (
    PRICING,
    assert_user_tree_untouched,
    branch_file,
    patch_to,
    regressed_repo,
    script,
)
from tests.infra.test_infra import PrefectServer, running_server

pytestmark = pytest.mark.slow

SERVE = (
    "from flows.post_merge import post_merge; "
    "post_merge.serve(name='suspend-test', limit=1, print_starting_message=False)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-suspend"))


def _wait_for(what: str, probe: Any, timeout_s: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _children(pid: int) -> list[int]:
    """The live child processes of `pid` (the runner starts one per flow run), but
    multiprocessing's resource tracker, which lives as long as the runner."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            cmdline = (stat.parent / "cmdline").read_bytes()
            if b"resource_tracker" not in cmdline:
                found.append(int(stat.parent.name))
    return found


@pytest.fixture
def served(
    server: PrefectServer, tmp_path: Path, mistral_server: MistralServer
) -> Iterator[subprocess.Popen[bytes]]:
    """`post_merge.serve(...)` in a subprocess talking to `server` (and to the scripted model
    server); stopped at teardown."""
    env = server.env(PREFECT_RUNNER_POLL_FREQUENCY="1", AUTOPILOT_HOME=str(tmp_path / "home"))
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_a_deployed_run_suspends_for_a_person_and_resumes_where_it_stopped(
    server: PrefectServer,
    served: subprocess.Popen[bytes],
    tmp_path: Path,
    mistral_server: MistralServer,
) -> None:
    repo, report, head = regressed_repo(tmp_path, plain_pytest=True)
    # The diagnosis blames the test, yet the patch edits production code: RISKY, a hand-off.
    script(mistral_server, [patch_to(5)], wrong_side="test")
    log = tmp_path / "serve.log"

    def deployment() -> Any:
        found = server.post("/deployments/filter", {"limit": 5})
        return found[0] if found else None

    dep = _wait_for("the served deployment", deployment)
    params = {
        "repo": str(repo),
        "reports": [str(report)],
        "archive": str(tmp_path / "archive"),
        "human_timeout": 900,
    }
    made = server.post(f"/deployments/{dep['id']}/create_flow_run", {"parameters": params})

    def state_of(*types: str) -> Any:
        fr = server.get(f"/flow_runs/{made['id']}")
        if fr["state"]["type"] in {"FAILED", "CRASHED", "COMPLETED"} - set(types):
            raise AssertionError(log.read_text()[-4000:])
        return fr if fr["state"]["type"] in types else None

    suspended = _wait_for("the suspension", lambda: state_of("PAUSED"))
    assert suspended["state"]["name"] == "Suspended"
    # The flow run's process exited: the runner holds no process for it while a person thinks.
    _wait_for("the run's process to exit", lambda: not _children(served.pid), 60)
    asked = len(mistral_server.requests)
    assert asked == 2  # the diagnosis and the patch

    server.post(
        f"/flow_runs/{made['id']}/resume",
        {"run_input": {"action": "approve", "note": "the code was wrong"}},
    )
    done = _wait_for("the resumed run", lambda: state_of("COMPLETED"))

    assert done["state"]["name"] == "Completed"
    assert len(mistral_server.requests) == asked  # nothing asked again
    [run_dir] = list((tmp_path / "archive" / "post_merge").glob(f"*/{made['id']}"))
    summary = json.loads((run_dir / "summary.json").read_text())
    [group] = summary["groups"]
    assert group["outcome"] == "fixed"
    assert "approved by a person: the code was wrong" in group["reasons"]
    assert summary["metrics"]["human_intervention_rate"] == 1.0
    assert "(10, 5))" in branch_file(repo, summary["branch"], PRICING)
    assert_user_tree_untouched(repo, head)
    # The resumed run went on from its archive: the scout ran once, the state was reopened;
    # the manifest lists what both parts archived.
    objects = json.loads((run_dir / "manifest.json").read_text())["objects"]
    names = [o["key"] for o in objects]
    assert {"model-calls.json", "summary.json"} <= set(names)
    assert len([k for k in names if k.endswith("-scout.json")]) == 1
    assert len([k for k in names if k.endswith("-resumed.json")]) == 1
    assert len([k for k in names if k.endswith("-context.json")]) == 1
    assert git(repo, "branch", "--list", "autopilot/*").strip() == summary["branch"]
