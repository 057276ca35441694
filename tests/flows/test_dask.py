"""Scale-out on prefect-dask: a real local Dask cluster with worker PROCESSES, every process
pointed at a real Prefect server on loopback (DESIGN.md: worker processes cannot use the
ephemeral server). Tasks run in the workers, not in the test process; so do the nightly's
per-file tasks when the nightly is given the cluster's address (`--dask ADDRESS`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect import flow, task

from tests.conftest import REPO_ROOT
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.commands.test_nightly import ERRORS_TEST
from tests.infra.test_infra import PrefectServer, running_server
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

pytestmark = [pytest.mark.slow, pytest.mark.own_prefect_server]

ERRORS_SPEC = "tests/test_errors.py"


@task(task_run_name="where {i}")
def where(i: int) -> tuple[int, int]:
    """The task's input and the id of the process it ran in."""
    time.sleep(0.3)  # long enough that one worker cannot take every task before the other starts
    return i, os.getpid()


@flow(name="dask-spread")
def spread(n: int) -> list[tuple[int, int]]:
    futures = where.map(list(range(n)))
    return [f.result() for f in futures]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-dask"))


@pytest.fixture
def cluster(
    server: PrefectServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Any]:
    """Two single-threaded worker processes that inherit an environment naming the server."""
    from distributed import LocalCluster
    from prefect.settings import PREFECT_API_URL, temporary_settings

    for key, value in server.env(PYTHONPATH=str(REPO_ROOT)).items():
        if key.startswith("PREFECT_") or key == "PYTHONPATH":
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-client"))
    # The model key in each worker's own environment, as an operator sets it: a job carries
    # secrets by reference only (tasks/scale), so a worker reads the key here.
    monkeypatch.setenv("MISTRAL_API_KEY", "test-key-not-real")
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as c,
        temporary_settings(updates={PREFECT_API_URL: server.api_url}),
    ):
        yield c


def _worker_pids(cluster: Any) -> set[int]:
    from distributed import Client

    with Client(cluster.scheduler_address) as client:
        return set(client.run(os.getpid).values())


def test_tasks_run_in_the_dask_worker_processes_and_report_to_the_server(
    cluster: Any, server: PrefectServer
) -> None:
    from prefect_dask import DaskTaskRunner

    workers = _worker_pids(cluster)
    assert len(workers) == 2 and os.getpid() not in workers

    runner: Any = DaskTaskRunner(address=cluster.scheduler_address)
    state = spread.with_options(task_runner=runner)(n=6, return_state=True)

    results = state.result()
    assert sorted(i for i, _ in results) == list(range(6))
    pids = {pid for _, pid in results}
    assert pids <= workers  # every task in a worker process, none in this one
    assert len(pids) == 2  # and both workers took a share
    # The workers reported each task run to the real server. Their states arrive through the
    # server's event pipeline, a moment after the results: wait for them (bounded), then check.
    query = {"flow_runs": {"id": {"any_": [str(state.state_details.flow_run_id)]}}}
    deadline = time.monotonic() + 120
    runs = server.post("/task_runs/filter", query)
    while time.monotonic() < deadline and not _all_completed(runs, 6):
        time.sleep(0.5)
        runs = server.post("/task_runs/filter", query)
    assert sorted(r["name"] for r in runs) == [f"where {i}" for i in range(6)]
    assert {(r.get("state") or {}).get("type") for r in runs} == {"COMPLETED"}


def _all_completed(runs: list[dict[str, Any]], count: int) -> bool:
    states = [(r.get("state") or {}).get("type") for r in runs]
    return len(states) == count and set(states) == {"COMPLETED"}


def test_nightly_with_dask_address_runs_per_file_tasks_on_the_workers(
    cluster: Any,
    server: PrefectServer,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from distributed import Client, get_task_stream

    from flows.commands.nightly import run

    # Settings travel to the workers inside each file job; these env vars are read here.
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    # One model call in flight for the whole cluster: each worker process has its own
    # semaphore of 1, so only the limit on the server can keep the two files' calls apart.
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_CONCURRENCY", "1")
    mistral_server.latency_s = 1.0
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(
        Rule(contains="src/inventory/errors.py", replies=[files_reply(ERRORS_TEST, ERRORS_SPEC)])
    )
    mistral_server.add(Rule(contains="src/inventory/reports.py", replies=[files_reply(GOOD)]))
    workers = {w: None for w in cluster.scheduler_info["workers"]}

    with Client(cluster.scheduler_address) as client, get_task_stream(client=client) as stream:
        code = run(
            repo,
            only=["src/inventory/reports.py", "src/inventory/errors.py"],
            dask=cluster.scheduler_address,
            json_out=True,
            archive=str(tmp_path / "arch"),
        )

    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    verdicts = {f["source"]: f["verdict"] for f in doc["files"]}
    assert verdicts == {
        "src/inventory/reports.py": "accepted",
        "src/inventory/errors.py": "accepted",
    }
    assert doc["branch"]
    # Both per-file tasks executed on the cluster's worker processes.
    executed = [t for t in stream.data if "generate" in str(t["key"])]
    assert len(executed) == 2, [t["key"] for t in stream.data]
    assert {t["worker"] for t in executed} <= set(workers)
    # The model calls of both workers took slots of one global concurrency limit.
    # They ran at the same time on two workers, yet never had two model calls in flight.
    spans = sorted(
        (min(s["start"] for s in t["startstops"]), max(s["stop"] for s in t["startstops"]))
        for t in executed
    )
    assert len({t["worker"] for t in executed}) == 2 and spans[1][0] < spans[0][1]
    assert doc["model_calls"] >= 4 and mistral_server.max_in_flight == 1
    limit = server.get("/v2/concurrency_limits/autopilot-model-calls")
    assert limit["limit"] == 1 and limit["active_slots"] == 0
