"""Prefect does what Prefect is for: the per-file task's time limit and infrastructure-only
retries, on a real Prefect (the session's test server) and a real sandbox."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from flows.commands.nightly import run
from flows.limits import (
    file_time_limit,
    group_time_limit,
    is_infrastructure_failure,
    retry_on_infrastructure,
)
from tasks.core.config import load_settings
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

HANGS = """\
import time


def test_waits_for_ever():
    time.sleep(3600)
"""


def test_time_limits_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_SANDBOX__TIMEOUT_S", "100")
    monkeypatch.setenv("AUTOPILOT_MODEL__TIMEOUT_S", "10")
    settings = load_settings()
    # 4 rounds of (sandbox + model), 3 flaky re-runs + 1 run, 3 judge samples.
    assert file_time_limit(settings, 4) == 4 * 110 + 4 * 100 + 3 * 10
    assert file_time_limit(settings, 4, 30.0) == 30.0
    assert group_time_limit(settings) == 4 * (2 * 10 + 2 * 100)


@pytest.mark.parametrize(
    ("exc", "retried"),
    [
        (ConnectionResetError("peer reset"), True),
        (httpx.ConnectError("refused"), True),
        (type("KilledWorker", (Exception,), {})("worker died"), True),
        (httpx.ReadTimeout("slow"), False),
        (TimeoutError("Scope timed out after 9 second(s)."), False),
        (AssertionError("a gate"), False),
        (ValueError("bad reply"), False),
    ],
)
def test_only_infrastructure_failures_are_retried(exc: BaseException, retried: bool) -> None:
    from prefect.states import Failed

    assert is_infrastructure_failure(exc) is retried
    assert retry_on_infrastructure(None, None, Failed(data=exc)) is retried


@pytest.mark.slow
def test_a_hung_file_is_stopped_at_its_limit_and_the_nightly_goes_on(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    # Only the task's limit can stop the hung test: the sandbox would wait an hour.
    monkeypatch.setenv("AUTOPILOT_SANDBOX__TIMEOUT_S", "3600")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__SPEC_TIMEOUT_S", "3600")
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(about="src/inventory/reports.py", replies=[files_reply(GOOD)]))
    mistral_server.add(
        Rule(about="src/inventory/errors.py", replies=[files_reply(HANGS, "tests/test_errors.py")])
    )
    started = time.monotonic()

    code = run(
        repo,
        only=["src/inventory/reports.py", "src/inventory/errors.py"],
        json_out=True,
        archive=str(tmp_path / "arch"),
        file_time_limit_s=45.0,
    )

    doc = json.loads(capsys.readouterr().out)
    files = {f["source"]: f for f in doc["files"]}
    assert code == 1
    hung = files["src/inventory/errors.py"]
    assert hung["verdict"] == "error"
    assert hung["reasons"] == [
        "src/inventory/errors.py: stopped at its time limit of 45s (file task hung)"
    ]
    assert files["src/inventory/reports.py"]["verdict"] == "accepted"
    assert doc["branch"]  # the nightly went on: the accepted file is on its branch
    # Stopped, not waited out (a bound an hour away from the sandbox's, not a timing claim).
    assert time.monotonic() - started < 1800
