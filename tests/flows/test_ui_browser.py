"""The operator's view: a real `prefect server` on loopback, the nightly on a copy of
examples/rails_shop against the scripted model server, then (1) the table, progress and markdown
artifacts and the autopilot.gate.failed event read back through the Prefect API client, and
(2) the flow run page opened in headless Chromium, its Artifacts tab showing the table artifact.
The screenshot for the operator's guide (docs/nightly-run.png) is refreshed when the test runs
with AUTOPILOT_UPDATE_DOCS=1; otherwise the test leaves the checkout alone."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.flows.test_nightly_rails import GOOD_SPEC, ORDERS_FACTORY, reply
from tests.infra.test_infra import PrefectServer, running_server

pytestmark = [pytest.mark.slow, pytest.mark.own_prefect_server]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "nightly-run.png"
ACCEPTED = "app/models/customer.rb"
REJECTED = "app/models/order.rb"
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-ui"))


VAGUE_ORDER_SPEC = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe Order, type: :model do
  it "can be built" do
    expect(Order.new).to be_truthy
  end
end
"""


@pytest.fixture(scope="module")
def nightly_run(
    server: PrefectServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Any]]:
    """The nightly's report and flow run id: run in this process against `server`, with one
    file accepted and one rejected by a gate."""

    tmp_path = tmp_path_factory.mktemp("ui-nightly")
    with pytest.MonkeyPatch.context() as monkeypatch, MistralServer() as mistral_server:
        yield from _run_nightly(server, mistral_server, monkeypatch, tmp_path)


def _run_nightly(
    server: PrefectServer,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[tuple[Any, Any]]:
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    from flows.nightly import nightly

    monkeypatch.setenv("AUTOPILOT_MODEL_URL", mistral_server.url)
    monkeypatch.setenv("MISTRAL_API_KEY", "test-key-not-real")
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    verdict = {"score": 0.8, "reasons": ["exact values"], "missing": []}
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[json.dumps(verdict)]))
    good = reply(
        ("spec/models/customer_spec.rb", GOOD_SPEC), ("spec/factories/orders.rb", ORDERS_FACTORY)
    )
    mistral_server.add(Rule(contains=f"# Task: test `{ACCEPTED}`", replies=[good]))
    vague = reply(("spec/models/order_spec.rb", VAGUE_ORDER_SPEC))
    mistral_server.add(Rule(contains=f"# Task: test `{REJECTED}`", replies=[vague]))
    updates: dict[Any, Any] = {
        PREFECT_API_URL: server.api_url,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None,
    }
    with temporary_settings(updates=updates):
        state = nightly(
            repo=str(repo),
            only=[ACCEPTED, REJECTED],
            max_iterations=1,
            archive=str(tmp_path / "archive"),
            return_state=True,
        )
        yield state.result(), state.state_details.flow_run_id


def _wait_for_events(name: str, flow_run_id: Any, want: int) -> list[Any]:
    """Events land asynchronously: poll the events API until `want` of them are there."""
    from prefect import get_client
    from prefect.events.filters import EventFilter, EventNameFilter

    deadline = time.monotonic() + 60
    found: list[Any] = []
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            page = client.read_events(EventFilter(event=EventNameFilter(name=[name])), limit=50)
            found = [e for e in page.events if e.payload.get("run_id") == str(flow_run_id)]
            if len(found) >= want:
                return found
            time.sleep(0.5)
    raise AssertionError(f"{len(found)} {name} event(s) for run {flow_run_id}, wanted {want}")


def _browser(user_data: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in [*CHROME_FLAGS, f"--user-data-dir={user_data}"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_nightly_artifacts_and_gate_event_are_queryable_through_the_api(
    nightly_run: tuple[Any, Any], server: PrefectServer
) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    report, flow_run_id = nightly_run
    verdicts = {f.source: f.verdict for f in report.files}
    assert verdicts == {ACCEPTED: "accepted", REJECTED: "rejected"}, [
        (f.source, f.gate, f.reasons) for f in report.files
    ]
    rejected = next(f for f in report.files if f.verdict == "rejected")

    # (1) Through the Prefect API client: the three artifact kinds and the gate event.
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        with get_client(sync_client=True) as client:
            flow_run = client.read_flow_run(flow_run_id)
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
                )
            )
        events = _wait_for_events("autopilot.gate.failed", flow_run_id, want=1)
    assert flow_run.name.startswith("nightly-shop-") and flow_run.state.is_completed()
    by_type = {a.type: a for a in artifacts}
    assert set(by_type) >= {"table", "progress", "markdown"}
    table = by_type["table"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert {r["file"]: r["verdict"] for r in rows} == {ACCEPTED: "accepted", REJECTED: "rejected"}
    assert by_type["progress"].data == 100.0
    # Two markdown artifacts: the run's summary, and memory across runs (the run history).
    markdown = {a.key: a for a in artifacts if a.type == "markdown"}
    assert set(markdown) == {"nightly-shop-summary", "history-shop"}
    assert "## Not accepted" in str(markdown["nightly-shop-summary"].data)
    assert REJECTED in str(markdown["nightly-shop-summary"].data)
    assert "## Trend" in str(markdown["history-shop"].data)
    [event] = events
    assert event.resource.id == f"autopilot.file.{REJECTED}"
    assert event.payload["gate"] == rejected.gate and event.payload["source"] == REJECTED


def test_flow_run_page_shows_the_table_artifact_in_chromium(
    nightly_run: tuple[Any, Any],
    server: PrefectServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    _, flow_run_id = nightly_run
    shot = tmp_path / "nightly-run.png"
    with (
        temporary_settings(updates={PREFECT_API_URL: server.api_url}),
        get_client(sync_client=True) as client,
    ):
        flow_run = client.read_flow_run(flow_run_id)
        [table] = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["nightly-shop"]))
        )
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setenv("SE_OFFLINE", "true")  # never let Selenium Manager reach the network
    driver = _browser(tmp_path / "chromium-profile")
    try:
        driver.get(f"{server.url}/runs/flow-run/{flow_run_id}")
        body = lambda d: d.find_element(By.TAG_NAME, "body").text  # noqa: E731
        # The run page's tabs are <li class="p-tab">; `?tab=Artifacts` alone is reset to Logs.
        tab = WebDriverWait(driver, 120).until(
            lambda d: d.find_element(
                By.XPATH, "//li[contains(@class, 'p-tab')][normalize-space(.)='Artifacts']"
            )
        )
        tab.click()
        # The artifact card: its type over its key (the timeline's label is canvas, not text).
        WebDriverWait(driver, 120).until(lambda d: f"TABLE\n{table.key}" in body(d))
        text = body(driver)
        assert flow_run.name in text
        driver.save_screenshot(str(shot))
        # The artifact's own page renders the table's rows.
        driver.get(f"{server.url}/artifacts/artifact/{table.id}")
        WebDriverWait(driver, 60).until(lambda d: REJECTED in body(d))
        assert ACCEPTED in body(driver)
    finally:
        driver.quit()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("AUTOPILOT_UPDATE_DOCS") == "1":
        shutil.copyfile(shot, DOCS_SCREENSHOT)
