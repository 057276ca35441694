"""The pull steps of infra/prefect.yaml, run for real: git clone/fetch of a real repository, and
Prefect Secret blocks read from the test server."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.deploy_steps import load_secrets, sync_repository
from tests.examples_repo import git, make_example_repo


def test_clone_then_fetch_follows_the_remote(tmp_path: Path) -> None:
    upstream = make_example_repo("py_inventory", tmp_path / "upstream")
    clone = tmp_path / "home" / "repo"

    first = sync_repository(url=str(upstream), directory=str(clone))

    assert first == {"directory": str(clone), "commit": git(upstream, "rev-parse", "HEAD").strip()}
    (upstream / "NEWS.md").write_text("merged\n")
    git(upstream, "add", "NEWS.md")
    git(upstream, "commit", "-qm", "merge")
    # Our own branches in the clone survive a fetch; HEAD moves to the remote's new head.
    git(clone, "branch", "autopilot/fix-abc")
    second = sync_repository(url=str(upstream), directory=str(clone))
    assert second["commit"] == git(upstream, "rev-parse", "HEAD").strip()
    assert (clone / "NEWS.md").read_text() == "merged\n"
    assert "autopilot/fix-abc" in git(clone, "branch", "--list", "autopilot/*")


def test_bad_configuration_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set AUTOPILOT_REPO_URL"):
        sync_repository(url=None, directory=str(tmp_path / "repo"))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("someone's files")
    with pytest.raises(ConfigError, match="not a git clone"):
        sync_repository(url=str(tmp_path), directory=str(taken))
    assert (taken / "notes.txt").read_text() == "someone's files"


def test_a_token_in_the_url_never_reaches_the_error(tmp_path: Path) -> None:
    url = "http://user:s3cr3t-token@127.0.0.1:9/nothing.git"
    with pytest.raises(ConfigError) as err:
        sync_repository(url=url, directory=str(tmp_path / "repo"))
    assert "s3cr3t-token" not in str(err.value) and "git clone failed" in str(err.value)


@pytest.mark.slow
def test_secrets_come_from_blocks(
    prefect_harness: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from prefect.blocks.system import Secret

    Secret(value="sk-from-block").save("autopilot-test-key", overwrite=True)
    monkeypatch.delenv("AUTOPILOT_TEST_KEY", raising=False)
    monkeypatch.setenv("AUTOPILOT_TEST_SET", "kept")
    monkeypatch.delenv("AUTOPILOT_TEST_MISSING", raising=False)

    with caplog.at_level(logging.WARNING, logger="tasks.deploy_steps"):
        out = load_secrets(
            {
                "AUTOPILOT_TEST_KEY": "autopilot-test-key",
                "AUTOPILOT_TEST_SET": "autopilot-test-key",
                "AUTOPILOT_TEST_MISSING": "no-such-block",
            }
        )

    assert out == {"loaded": "AUTOPILOT_TEST_KEY"}  # names only, never values
    assert os.environ["AUTOPILOT_TEST_KEY"] == "sk-from-block"
    assert os.environ["AUTOPILOT_TEST_SET"] == "kept"
    assert "AUTOPILOT_TEST_MISSING" not in os.environ
    assert any("no-such-block" in r.getMessage() for r in caplog.records)
    with pytest.raises(ConfigError, match="not an environment variable name"):
        load_secrets({"BAD NAME": "autopilot-test-key"})
