"""The model calls' shared limit: a Prefect global concurrency limit on a real (test) server."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flows.runtime import ensure_shared_model_limit
from tasks.model.transport import shared_slot

pytestmark = pytest.mark.slow


def test_the_limit_is_created_once_and_an_operators_size_is_kept(prefect_harness: None) -> None:
    assert ensure_shared_model_limit("autopilot-test-created", 3) == 3
    # Existing: the size on the server wins over the run's max_concurrency.
    assert ensure_shared_model_limit("autopilot-test-created", 9) == 3


def test_a_missing_limit_is_an_error_not_an_unlimited_call(prefect_harness: None) -> None:
    from prefect.concurrency._asyncio import ConcurrencySlotAcquisitionError

    with pytest.raises(ConcurrencySlotAcquisitionError), shared_slot("autopilot-test-missing"):
        pass


def test_callers_holding_slots_never_exceed_the_limit(prefect_harness: None) -> None:
    ensure_shared_model_limit("autopilot-test-two", 2)
    lock = threading.Lock()
    now = peak = 0

    def call() -> None:
        nonlocal now, peak
        with shared_slot("autopilot-test-two"):
            with lock:
                now += 1
                peak = max(peak, now)
            time.sleep(0.3)
            with lock:
                now -= 1

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert peak == 2  # five callers, two slots: two at a time, never three


def test_no_name_takes_no_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect.concurrency.sync

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a slot was taken")

    monkeypatch.setattr(prefect.concurrency.sync, "concurrency", refuse)
    with shared_slot(None):  # never asks Prefect
        pass
    with pytest.raises(AssertionError, match="a slot was taken"), shared_slot("named"):
        pass


def test_settings_that_name_a_limit_get_it_created_for_the_run(
    prefect_harness: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from flows.runtime import with_shared_model_limit
    from tasks.core.config import load_settings

    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AUTOPILOT_MODEL__SHARED_LIMIT", "autopilot-test-from-settings")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_CONCURRENCY", "5")
    settings = with_shared_model_limit(load_settings(tmp_path), None)
    assert settings.model.shared_limit == "autopilot-test-from-settings"
    assert ensure_shared_model_limit("autopilot-test-from-settings", 99) == 5
    # Without a name nothing is created and nothing changes.
    monkeypatch.delenv("AUTOPILOT_MODEL__SHARED_LIMIT")
    plain = load_settings(tmp_path)
    assert with_shared_model_limit(plain, None) is plain
