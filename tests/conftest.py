"""Test-wide configuration: no test can reach a real model, and no test touches ~/.autopilot."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"

# Any model endpoint but the scripted server a test starts itself is unreachable: no key, and
# a URL on a closed loopback port unless a test sets its own.
#: Switches of the test run itself, not settings: kept (AUTOPILOT_UPDATE_DOCS=1 lets the UI
#: tests refresh the screenshots and charts in docs/).
TEST_SWITCHES = ("AUTOPILOT_UPDATE_DOCS",)
for _name in list(os.environ):
    if _name.startswith(("AUTOPILOT_", "MISTRAL_")) and _name not in TEST_SWITCHES:
        del os.environ[_name]
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "1"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("autopilot-home")
    old = os.environ.get("AUTOPILOT_HOME")
    os.environ["AUTOPILOT_HOME"] = str(home)
    yield
    if old is None:
        os.environ.pop("AUTOPILOT_HOME", None)
    else:
        os.environ["AUTOPILOT_HOME"] = old


def _drain_prefect_services() -> None:
    """Stop Prefect's process-wide client services (events worker, log worker, concurrency-slot
    services). Each keeps the API client it was started with; one started while a test pointed
    the process at its own server would go on talking to that server after it stopped."""
    from prefect._internal.concurrency.services import _QueueServiceBase

    _QueueServiceBase.drain_all(timeout=30, at_exit=False)


def _isolate(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("own_prefect_server") is None:
        yield
        return
    _drain_prefect_services()
    yield
    _drain_prefect_services()


# Both scopes: module fixtures of such a module (a nightly run once for several tests) start
# after the module-level reset, and each test's own switch is undone after it.
@pytest.fixture(autouse=True, scope="module")
def _own_prefect_server_module(request: pytest.FixtureRequest) -> Iterator[None]:
    yield from _isolate(request)


@pytest.fixture(autouse=True)
def _own_prefect_server_test(request: pytest.FixtureRequest) -> Iterator[None]:
    yield from _isolate(request)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server for the whole session (~11 s to start), only when a test needs it."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),  # type: ignore[dict-item]
    ):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test skipped because a tool is "not installed" fails instead: `make setup` installs
    every tool the suite uses (bubblewrap, rspec, chromium), so a missing one is a broken setup,
    never a silent pass. ALLOW_MISSING_TOOLS=1 lets a partial machine skip them."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or os.environ.get("ALLOW_MISSING_TOOLS") == "1":
        return
    reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
    if "not installed" in reason:
        report.outcome = "failed"
        report.longrepr = f"{reason} (run `make setup`; ALLOW_MISSING_TOOLS=1 to skip)"
