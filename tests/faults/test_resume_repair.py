"""A real post-merge repair killed (SIGKILL to its process group) right after its diagnosis,
then run again, plainly or with ``--resume``: the diagnosis is never asked for again, and the
fix is the one an uninterrupted run commits.

The repair runs as a subprocess (`autopilot repair --json`) on examples/py_inventory with a
merged regression and its real JUnit report, against the scripted model server in this process
and the session's Prefect test server. The surgeon's first answer is held back, so the run is
killed while that request is in flight: a reply never received is the only one asked again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.mistral_server import MistralServer, Rule, ok
from tests.faults.test_kill import _child_env
from tests.faults.test_resume import _kept_roles
from tests.flows.test_post_merge import (
    PRICING,
    branch_file,
    diagnosis_json,
    is_surgeon,
    patch_to,
    regressed_repo,
)

pytestmark = pytest.mark.slow
DEADLINE_S = 300.0  # bound on waiting for the diagnosis (never asserted as a time)


def _repair(repo: Path, report: Path, archive: Path, *extra: str) -> list[str]:
    exe = Path(sys.executable).parent / "autopilot"
    return [str(exe), "repair", "--repo", str(repo), "--report", str(report),
            "--archive", str(archive), "--json", *extra]  # fmt: skip


def _server(held_s: float) -> tuple[MistralServer, Rule, Rule]:
    server = MistralServer().start()
    diagnose = server.add(Rule(schema_name="diagnosis", replies=[diagnosis_json()]))
    first = ok(patch_to(5), delay_s=held_s) if held_s else patch_to(5)
    surgeon = server.add(Rule(when=is_surgeon, replies=[first, patch_to(5)]))
    return server, diagnose, surgeon


def _run(argv: list[str], env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _run_id(archive: Path) -> str:
    runs = sorted((archive / "post_merge").glob("*/*"))
    assert len(runs) == 1, runs
    assert list(runs[0].rglob("*diagnos*.json")), sorted(p.name for p in runs[0].rglob("*"))
    return runs[0].name


@pytest.mark.parametrize("again", ["rerun", "resume"])
def test_a_repair_killed_after_its_diagnosis_never_asks_for_it_again(
    again: str, tmp_path: Path, prefect_harness: None
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    home, archive = tmp_path / "home", tmp_path / "archive"
    server, diagnose, surgeon = _server(held_s=120)
    try:
        env = _child_env(server, home)
        log = (tmp_path / "killed.log").open("wb")
        first = subprocess.Popen(
            _repair(repo, report, archive), env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + DEADLINE_S
            while not ("diagnostician" in _kept_roles(home) and surgeon.served):
                assert first.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the diagnosis never came"
                time.sleep(0.05)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(timeout=30)
            log.close()
        assert (diagnose.served, surgeon.served) == (1, 1)
        killed_id = _run_id(archive)  # its state was archived after the diagnosis
        extra = ("--resume", killed_id) if again == "resume" else ()
        doc = _run(_repair(repo, report, archive, *extra), env)
    finally:
        server.stop()
    # The diagnosis was received once and never asked again; the surgeon, whose reply never
    # arrived, was asked once more.
    assert (diagnose.served, surgeon.served) == (1, 2)
    [group] = doc["groups"]
    assert group["outcome"] == "fixed", group
    assert "(10, 5))" in branch_file(repo, doc["branch"], PRICING)
    if again == "resume":
        [run_dir] = list((archive / "post_merge").glob(f"*/{doc['run_id']}"))
        last = sorted(run_dir.glob("state-*.json"))[-1]
        assert json.loads(last.read_text()).get("resumed_from") == killed_id
