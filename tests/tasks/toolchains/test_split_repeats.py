"""split_repeats: one command result per run of a process that ran the tests several times."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.core.types import CommandResult
from tasks.toolchains.runs import split_repeats


def _status(folder: Path, index: int, exit_code: int, seconds: float) -> None:
    (folder / f"run-{index}.json").write_text(json.dumps({"exit": exit_code, "seconds": seconds}))


def _cmd(exit_code: int = 0, duration: float = 10.0, reason: str | None = None) -> CommandResult:
    return CommandResult(
        argv=["rspec"], exit_code=exit_code, duration_s=duration, reason=reason, stdout="out"
    )


def test_every_run_finished_gives_one_result_each_and_the_start_up_to_the_first(
    tmp_path: Path,
) -> None:
    for i in (1, 2, 3):
        _status(tmp_path, i, 0, 1.0)
    runs = split_repeats(_cmd(), tmp_path, 3)
    assert [r.exit_code for r in runs] == [0, 0, 0]
    assert [r.duration_s for r in runs] == [8.0, 1.0, 1.0]
    assert all(r.stdout == "out" for r in runs)


def test_a_failing_run_ends_the_runs(tmp_path: Path) -> None:
    _status(tmp_path, 1, 0, 1.0)
    _status(tmp_path, 2, 1, 1.0)
    runs = split_repeats(_cmd(exit_code=1), tmp_path, 3)
    assert [r.exit_code for r in runs] == [0, 1]


def test_a_stopped_process_gives_the_unfinished_run_its_reason_and_not_the_finished_ones(
    tmp_path: Path,
) -> None:
    _status(tmp_path, 1, 0, 2.0)
    runs = split_repeats(_cmd(exit_code=-9, reason="timeout after 20s", duration=20), tmp_path, 3)
    assert [(r.exit_code, r.reason) for r in runs] == [(0, None), (-9, "timeout after 20s")]
    assert runs[1].duration_s == 18.0


def test_no_status_at_all_is_the_process_result(tmp_path: Path) -> None:
    runs = split_repeats(_cmd(exit_code=1), tmp_path, 3)
    assert runs == [_cmd(exit_code=1)]


def test_a_missing_status_after_exit_zero_or_a_forged_one_is_a_run_that_did_not_finish(
    tmp_path: Path,
) -> None:
    _status(tmp_path, 1, 0, 1.0)
    (tmp_path / "run-2.json").write_text('{"exit": "zero"}')
    runs = split_repeats(_cmd(), tmp_path, 3)
    assert len(runs) == 2 and runs[1].exit_code == 1
    assert "run left no status" in runs[1].stderr
