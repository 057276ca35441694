"""`autopilot repair` input checks: bad input is one line on stderr and exit 2, before any flow."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.commands.repair import run
from tests.examples_repo import make_example_repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_example_repo("py_inventory", tmp_path_factory.mktemp("cli") / "inv")


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("autopilot: error: ")
    return err[0]


def test_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path / "nope", []) == 2
    assert "not a directory" in _one_error_line(capsys)


def test_bad_ref(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, [], ref="no-such-ref") == 2
    assert "'no-such-ref' is not a commit" in _one_error_line(capsys)


def test_bad_option(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, [], max_retries=-1) == 2
    assert "max_retries" in _one_error_line(capsys)


def test_without_a_model_no_usable_report_is_one_line_naming_each(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No model is needed to start a repair; reports none of which can be used still stop it.
    missing, log = tmp_path / "missing.xml", tmp_path / "build.log"
    log.write_text("FAILED tests/test_x.py::test_y - AssertionError\n")
    assert run(repo, [missing, log, "s3:///key"], json_out=True) == 2
    out = capsys.readouterr()
    assert out.out == ""
    [line] = out.err.strip().splitlines()
    assert line.startswith("autopilot: error: no usable report: ")
    assert "s3:///key: no bucket in the URI" in line
    assert f"{missing}: no such file" in line
    assert "a raw log is read only by a model" in line


def test_no_usable_report(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A closed loopback port: configured, never contacted (the input check fails first).
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "http://127.0.0.1:9")
    missing = tmp_path / "missing.xml"
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite><testcase")
    assert run(repo, [missing, broken]) == 2
    line = _one_error_line(capsys)
    assert "missing.xml: no such file" in line
