"""`autopilot serve` (flows.commands.serve.run) against a real Prefect server on loopback: it
registers nightly with its cron schedule, post-merge and premerge with their event triggers,
and audit, executes a run of a served deployment, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.commands.serve import run
from tests.examples_repo import make_example_repo
from tests.infra.test_infra import PrefectServer, running_server
from tests.paths import REPO_ROOT


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-serve"))


def _wait_for(what: str, probe: Any, timeout_s: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "every night"}, "--cron: 'every night' is not a valid cron string"),
        ({"timezone": "Mars/Olympus"}, "--timezone: 'Mars/Olympus' is not a known IANA timezone"),
        ({"repo": "/nonexistent/repo"}, "--repo: /nonexistent/repo: not a directory"),
        ({"limit": 0}, "--limit: 0 is less than 1"),
    ],
)
def test_bad_options_are_exit_2_with_one_line(
    kwargs: dict[str, Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(**kwargs) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"autopilot: error: {message}")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_serve_registers_the_four_deployments_runs_one_and_stops_on_ctrl_c(
    server: PrefectServer, tmp_path: Path
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    code = (
        "import sys; from flows.commands.serve import run; "
        f"sys.exit(run(cron='30 1 * * 1-5', timezone='Europe/Paris', repo={str(repo)!r}, "
        "max_files=3))"
    )
    env = server.env(
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        AUTOPILOT_HOME=str(tmp_path / "home"),
        AUTOPILOT_SANDBOX__BACKEND="none",
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=tmp_path,  # not the project root: the served flows load by module path
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def deployments() -> dict[str, Any]:
            found = {d["name"]: d for d in server.post("/deployments/filter", {"limit": 20})}
            return found if len(found) == 4 else {}

        found = _wait_for("four deployments", deployments)
        assert set(found) == {"nightly", "post-merge", "premerge", "audit"}
        nightly = found["nightly"]
        [schedule] = nightly["schedules"]
        assert schedule["schedule"]["cron"] == "30 1 * * 1-5"
        assert schedule["schedule"]["timezone"] == "Europe/Paris"
        assert schedule["active"] is True
        assert nightly["parameters"] == {"repo": str(repo), "ref": "HEAD", "max_files": 3}
        assert "nightly" in nightly["tags"] and "autopilot" in nightly["tags"]
        # prefect.yaml's one-run-at-a-time limit, applied by serve too.
        assert nightly["global_concurrency_limit"]["limit"] == 1
        assert found["post-merge"]["global_concurrency_limit"] is None
        flows = {f["id"]: f["name"] for f in server.post("/flows/filter", {})}
        assert flows[found["post-merge"]["flow_id"]] == "post-merge"
        automations = server.post("/automations/filter", {})
        [trigger] = [a for a in automations if a["trigger"]["expect"] == ["autopilot.ci.failed"]]
        assert trigger["actions"][0]["deployment_id"] == found["post-merge"]["id"]
        [trigger] = [a for a in automations if a["trigger"]["expect"] == ["autopilot.pr.changed"]]
        assert trigger["actions"][0]["deployment_id"] == found["premerge"]["id"]

        # The served process executes runs: the audit deployment on the example repository.
        made = server.post(f"/deployments/{found['audit']['id']}/create_flow_run", {})

        def finished() -> dict[str, Any] | None:
            fr = server.get(f"/flow_runs/{made['id']}")
            return fr if fr["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED") else None

        flow_run = _wait_for("the audit run", finished)
        assert flow_run["state"]["type"] == "COMPLETED", log.read_text()[-3000:]
        assert flow_run["name"].startswith("audit")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait(timeout=10)
    assert rc == 0, log.read_text()[-3000:]


def test_serve_applies_prefect_yaml_concurrency_limits() -> None:
    import yaml

    from flows.serve import ServeOptions, build_deployments

    declared = yaml.safe_load((REPO_ROOT / "infra" / "prefect.yaml").read_text())["deployments"]
    limits = {d["name"]: d.get("concurrency_limit") for d in declared}
    served = {d.name: d.concurrency_limit for d in build_deployments(ServeOptions(repo="/r"))}
    for name, limit in served.items():
        assert limit == limits[name], name
    assert served["nightly"] == 1
