"""The nightly process killed with SIGKILL mid-run, then started again.

`autopilot nightly` runs as a real subprocess (its own process group) on a copy of
examples/py_inventory, against the scripted model server in this process and the session's
Prefect test server. One file finishes fast; the other's generator reply is held back by the
server, so the run is still busy when the group is killed. The second run must reuse the
finished file (no model request about it), generate the other one, and archive one run whose
manifest lists each object once with the right sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule, ok
from tests.flows.commands.test_nightly import ERRORS_TEST
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

pytestmark = pytest.mark.slow

FAST_FILE = "src/inventory/reports.py"
SLOW_FILE = "src/inventory/errors.py"
KILL_DEADLINE_S = 240.0  # bound on waiting for the first file to finish (never asserted)


def _child_env(server: MistralServer, home: Path) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPILOT_", "MISTRAL_"))}
    env.update(
        AUTOPILOT_HOME=str(home),
        AUTOPILOT_MODEL_URL=server.url,
        MISTRAL_API_KEY="test-key-not-real",
        AUTOPILOT_GATES__FLAKY_RUNS="1",
        AUTOPILOT_MODEL__JUDGE_SAMPLES="1",
        AUTOPILOT_MODEL__MAX_RETRIES="0",
        # The session's test server: the child must not start an ephemeral one of its own.
        PREFECT_API_URL=str(PREFECT_API_URL.value()),
    )
    return env


def _nightly(repo: Path, archive: Path) -> list[str]:
    exe = Path(sys.executable).parent / "autopilot"
    only = ["--only", FAST_FILE, "--only", SLOW_FILE]
    return [str(exe), "nightly", "--repo", str(repo), *only, "--archive", str(archive), "--json"]


def _stored_outcomes(home: Path) -> list[Path]:
    cache = home / "cache" / "nightly"
    return sorted(cache.rglob("*.json")) if cache.is_dir() else []


def test_killed_nightly_restarts_without_regenerating_finished_files(
    prefect_harness: None, tmp_path: Path
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    home, archive = tmp_path / "home", tmp_path / "archive"
    server = MistralServer().start()
    try:
        server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
        server.add(Rule(about=FAST_FILE, replies=[files_reply(GOOD)]))
        # Held back far longer than the test waits: the run is killed while waiting for it.
        slow_rule = server.add(
            Rule(
                about=SLOW_FILE,
                replies=[ok(files_reply(ERRORS_TEST, "tests/test_errors.py"), delay_s=100)],
            )
        )
        env = _child_env(server, home)
        log1 = (tmp_path / "run1.log").open("wb")
        first = subprocess.Popen(
            _nightly(repo, archive), env=env, stdout=log1, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + KILL_DEADLINE_S
            while not _stored_outcomes(home) and first.poll() is None:
                assert time.monotonic() < deadline, "no file finished in time"
                time.sleep(0.2)
            assert first.poll() is None, (tmp_path / "run1.log").read_text()[-2000:]
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(timeout=30)
            log1.close()
        assert first.returncode == -signal.SIGKILL
        assert len(_stored_outcomes(home)) == 1
        run1 = list(server.requests)
        assert any(FAST_FILE in r.text for r in run1)
        assert any(SLOW_FILE in r.text for r in run1)  # it was in flight when killed
        assert not archive.exists() or not any(archive.rglob("summary.json"))

        slow_rule.replies = [files_reply(ERRORS_TEST, "tests/test_errors.py")]
        slow_rule.served = 0
        second = subprocess.run(
            _nightly(repo, archive), env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        server.stop()

    assert second.returncode == 0, second.stderr[-3000:]
    doc = json.loads(second.stdout)
    verdicts = {f["source"]: f["verdict"] for f in doc["files"]}
    assert verdicts == {FAST_FILE: "accepted", SLOW_FILE: "accepted"}
    run2 = server.requests[len(run1) :]
    assert run2 and not any(FAST_FILE in r.text for r in run2)  # reused, not regenerated
    assert sum(SLOW_FILE in r.text and r.schema_name is None for r in run2) == 1
    branch = str(doc["branch"])
    assert git(repo, "show", f"{branch}:tests/test_reports.py") == GOOD
    assert git(repo, "show", f"{branch}:tests/test_errors.py") == ERRORS_TEST
    assert git(repo, "branch", "--list").split().count("main") == 1

    # One archived run (the killed one archived nothing), each object listed once, checksums.
    (manifest_path,) = archive.rglob("manifest.json")
    manifest = json.loads(manifest_path.read_text())
    keys = [o["key"] for o in manifest["objects"]]
    assert len(keys) == len(set(keys)) and "summary.json" in keys
    run_dir = manifest_path.parent
    for entry in manifest["objects"]:
        data = (run_dir / entry["key"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["key"]
        assert len(data) == entry["size"]
    on_disk = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    assert on_disk - {"manifest.json"} == set(keys)
    assert json.loads((run_dir / "summary.json").read_text())["run_id"] == doc["run_id"]
