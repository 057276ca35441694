"""-v shows Autopilot's progress, -vv adds the HTTP clients' requests, never at -v."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples_repo import make_example_repo

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))


def _stderr(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([AUTOPILOT, *args], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.slow
def test_v_is_progress_and_vv_adds_http_requests(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    assert _stderr("audit", "--repo", str(repo), "--json") == ""
    audit = _stderr("-v", "audit", "--repo", str(repo), "--json")
    assert "INFO tasks.audit.baseline: the suite ran: 11 tests" in audit
    # A flow run on Prefect's (ephemeral) server: progress, not one line per HTTP request.
    nightly = ["nightly", "--repo", str(repo), "--max-files", "1", "--json"]
    nightly += ["--archive", str(tmp_path / "archive")]
    progress = _stderr("-v", *nightly)
    assert "INFO flows.nightly_baseline: baseline of inv: 6 files" in progress
    assert "INFO prefect.flow_runs:" in progress
    assert "HTTP Request" not in progress and "httpcore" not in progress
    detail = _stderr("-vv", *nightly)
    assert "INFO httpx: HTTP Request: " in detail
    assert "sqlalchemy" not in detail  # the server's ORM is -vvv material
