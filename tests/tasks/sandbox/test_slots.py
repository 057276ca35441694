"""Sandboxed commands take a slot: never more than ``sandbox.max_parallel`` run at once in a
process, and a command's timeout starts when it runs, not while it waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tasks.core.config import SandboxSettings
from tasks.core.types import CommandResult
from tasks.sandbox.make import make_runner
from tasks.sandbox.slots import default_slots

# Each command marks itself running, counts the marks, and stays a moment (a file of its own:
# every sandbox has its own pid namespace, so $$ is the same in all).
_COUNT = 'm=$(mktemp running.XXXXXX); ls running.* | wc -l >> counts; sleep 0.3; rm "$m"'


def _run_together(root: Path, max_parallel: int | None, commands: int) -> list[int]:
    settings = SandboxSettings(backend="bwrap", max_parallel=max_parallel)
    runner = make_runner(settings, root=root, cache_dir=root.parent / "cache")
    start = threading.Barrier(commands)
    results: list[CommandResult] = []

    def one() -> None:
        start.wait(timeout=30)
        results.append(runner.run(["sh", "-c", _COUNT], cwd=root))

    threads = [threading.Thread(target=one) for _ in range(commands)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.exit_code for r in results] == [0] * commands, [r.stderr for r in results]
    return [int(n) for n in (root / "counts").read_text().split()]


def test_no_more_commands_run_at_once_than_the_slots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    counts = _run_together(root, 2, 6)
    assert len(counts) == 6
    assert max(counts) <= 2


def test_without_a_setting_the_slots_are_the_cpus(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    commands = default_slots() + 2
    counts = _run_together(root, None, commands)
    assert max(counts) <= default_slots()


def test_a_command_waiting_for_a_slot_has_its_whole_timeout_when_it_runs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    runner = make_runner(
        SandboxSettings(backend="bwrap", max_parallel=1), root=root, cache_dir=tmp_path / "c"
    )
    started = threading.Event()
    done: dict[str, CommandResult] = {}

    def long() -> None:
        started.set()
        done["long"] = runner.run(
            ["sh", "-c", "sleep 1.5; touch long-done"], cwd=root, timeout_s=30
        )

    first = threading.Thread(target=long)
    first.start()
    started.wait(timeout=30)
    time.sleep(0.2)  # the long command holds the only slot
    # It runs only after the long one ended (its mark is there), and still has its whole second.
    script = "test -f long-done && sleep 0.5 && echo ran"
    short = runner.run(["sh", "-c", script], cwd=root, timeout_s=1.0)
    first.join()
    assert done["long"].exit_code == 0
    assert not short.timed_out and short.exit_code == 0 and "ran" in short.stdout
