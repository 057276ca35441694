"""Secrets by reference: what a job carries to a worker holds no secret value in any form;
the worker reads each secret it needs again (the flow's own process, its environment, a
Prefect Secret block), or says in one line where it looked."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import pytest
from pydantic import SecretStr

from tasks.core.config import load_settings
from tasks.core.errors import ConfigError
from tasks.scale import SecretRefs, ShippedRun, resolved_settings, shipped_settings
from tasks.scale.secrets import with_block_secrets
from tests.secret_forms import disguises

KEY = "sk-live-7d41c0ffee5eed2bb3a9"
HISTORY = "postgresql://ops:hunter2-very-secret@db.internal/history"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MISTRAL_API_KEY", KEY)
    monkeypatch.setenv("AUTOPILOT_HISTORY__URL", HISTORY)
    return load_settings(tmp_path)


def test_shipped_settings_hold_no_secret_and_name_where_the_key_is_read(settings) -> None:  # type: ignore[no-untyped-def]
    shipped, refs = shipped_settings(settings)

    assert shipped.mistral_api_key is None and shipped.history.url is None
    [ref] = refs.refs  # the history store's URL is not a job's: it never leaves the flow
    assert ref.path == "mistral_api_key"
    assert ref.env == ("MISTRAL_API_KEY", "AUTOPILOT_MISTRAL_API_KEY") and ref.block is None
    assert settings.mistral_api_key.get_secret_value() == KEY  # the flow's own are untouched


def test_a_pickled_job_holds_no_secret_in_any_form(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What Dask sends to the scheduler and the workers is the pickled task parameters."""
    from tasks.generate.job import FileJob
    from tasks.generate.targets import Target

    shipped, refs = shipped_settings(settings)
    run = ShippedRun(
        token="t", toolchain="python-pytest", project=tmp_path, worktree=tmp_path, secrets=refs
    )
    job = FileJob(
        project=tmp_path,
        target=Target(source="src/a.py", kind="module", spec="tests/test_a.py", reason="untested"),
        toolchain="python-pytest",
        settings=shipped,
        store_dir=tmp_path,
        run=run,
    )
    data = pickle.dumps(job)
    for secret in (KEY, "hunter2-very-secret"):
        for name, form in disguises(secret).items():
            assert form.encode() not in data, name
        assert base64.b64encode(secret.encode()) not in data


def test_the_flow_process_takes_its_own_secret(settings) -> None:  # type: ignore[no-untyped-def]
    shipped, refs = shipped_settings(settings)
    assert resolved_settings(shipped, refs, local=settings).mistral_api_key == SecretStr(KEY)


def test_a_worker_reads_the_key_from_its_environment(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    shipped, refs = shipped_settings(settings)
    monkeypatch.setenv("MISTRAL_API_KEY", "worker-own-key-9f8e7d6c")

    job = resolved_settings(shipped, refs)

    assert job.mistral_api_key.get_secret_value() == "worker-own-key-9f8e7d6c"
    assert job.history.url is None


def test_a_worker_without_the_key_says_where_it_looked(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    shipped, refs = shipped_settings(settings)
    monkeypatch.delenv("MISTRAL_API_KEY")

    with pytest.raises(ConfigError) as err:
        resolved_settings(shipped, refs)

    line = str(err.value)
    assert "\n" not in line and "MISTRAL_API_KEY" in line and "by reference" in line
    assert KEY not in line


def test_no_model_no_reference(tmp_path: Path) -> None:
    shipped, refs = shipped_settings(load_settings(tmp_path))
    assert refs == SecretRefs() and resolved_settings(shipped, refs).mistral_api_key is None


@pytest.mark.slow
def test_the_key_from_a_prefect_secret_block(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.blocks.system import Secret

    Secret(value=KEY).save("scale-test-key", overwrite=True)
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    monkeypatch.setenv("AUTOPILOT_MODEL__API_KEY_SECRET", "scale-test-key")
    flow_side = with_block_secrets(load_settings(tmp_path))
    assert flow_side.mistral_api_key == SecretStr(KEY) and flow_side.model_configured

    shipped, refs = shipped_settings(flow_side)
    [ref] = refs.refs
    assert ref.block == "scale-test-key"
    assert resolved_settings(shipped, refs).mistral_api_key == SecretStr(KEY)

    monkeypatch.setenv("AUTOPILOT_MODEL__API_KEY_SECRET", "no-such-block")
    with pytest.raises(ConfigError, match="no-such-block"):
        with_block_secrets(load_settings(tmp_path))
