"""Logs in the UI: a warning of tasks/ (the model client's retry) read back from the Prefect
API's logs of the nightly's flow run; nothing is sent, and nothing warns, outside a run."""

from __future__ import annotations

import asyncio
import json
import logging
import warnings
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from flows.commands.nightly import run
from flows.runtime import OUR_LOGGERS, collect_logs
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule, error
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply


async def _logs(flow_run_id: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with get_client() as client:
        flt = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[UUID(flow_run_id)]))
        return await client.read_logs(log_filter=flt, limit=200)


@pytest.mark.slow
def test_model_retry_warning_reaches_the_flow_runs_logs(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.logging.handlers import APILogHandler

    repo = make_example_repo("py_inventory", tmp_path / "inv")
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "0")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(
        Rule(about="src/inventory/reports.py", faults=[error(503)], replies=[files_reply(GOOD)])
    )

    code = run(repo, only=["src/inventory/reports.py"], json_out=True, archive=str(tmp_path / "a"))

    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 0, doc
    APILogHandler().flush()
    logs = asyncio.run(_logs(doc["run_id"]))
    retries = [
        log for log in logs if log.name.startswith("tasks.model") and "retrying" in log.message
    ]
    assert retries, ([(log.name, log.message) for log in logs], captured.err[-3000:])
    assert retries[0].level == logging.WARNING
    assert "src/inventory/reports.py" in retries[0].message and "HTTP 503" in retries[0].message
    assert retries[0].task_run_id is not None  # the file's task run, not only the flow run


def test_outside_a_run_nothing_is_sent_and_nothing_warns() -> None:
    collect_logs()
    collect_logs()  # idempotent: one handler per logger
    for name in OUR_LOGGERS:
        handlers = [h for h in logging.getLogger(name).handlers if "RunLog" in type(h).__name__]
        assert len(handlers) == 1, name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logging.getLogger("tasks.model.client").warning("outside any flow run")
