"""What the stacks' test runs share: a scratch directory per run inside the worktree, the
toolchain's helper files copied there, the raw reports kept, tool output cut to size, the
per-test-file lines a contexts helper wrote read back.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from collections.abc import Collection
from pathlib import Path

from tasks.core.types import CommandResult, SuiteProblem, ValidationResult
from tasks.facts.evidence import LineContexts
from tasks.toolchains.base import SuiteResult

log = logging.getLogger(__name__)

#: Scratch space for reports inside the repository (the only place a sandbox can write).
SCRATCH_DIR = ".autopilot-tmp"
#: How much of a tool's output to keep in an error message.
MAX_ERROR_CHARS = 4000


def not_run(
    toolchain: str, specs: list[str], target: str | None, tool: str, message: str
) -> SuiteResult:
    """A run that never started because of the environment (e.g. a prepare command failed)."""
    problem = SuiteProblem(tool=tool, cause="environment", message=message)
    result = ValidationResult(
        toolchain=toolchain,
        loaded=False,
        load_error=message,
        specs=list(specs),
        target=target,
        problem=problem,
    )
    return SuiteResult(validation=result)


def scratch_dir(repo: Path) -> Path:
    """A fresh directory for one run's reports, inside the repository but ignored by git.

    The directory holds a ``.gitignore`` of ``*`` so the reports never show in ``git status``
    nor get committed with accepted tests.
    """
    run_dir = scratch_base(repo) / uuid.uuid4().hex[:12]
    run_dir.mkdir()
    return run_dir


def scratch_base(repo: Path) -> Path:
    """``<repo>/.autopilot-tmp``, created with a ``.gitignore`` of ``*`` when missing."""
    base = repo / SCRATCH_DIR
    base.mkdir(exist_ok=True)
    ignore = base / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return base


def copy_resource(source: Path, run_dir: Path) -> Path:
    """Copy a toolchain's resource file into `run_dir`, the one directory every sandbox sees."""
    dest = run_dir / source.name
    shutil.copyfile(source, dest)
    return dest


def keep_reports(run_dir: Path, reports_dir: Path, skip: Collection[str]) -> None:
    """Copy one run's reports to `reports_dir`, keeping their names: not the names in `skip`
    (the toolchain's helper files and caches)."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    for item in run_dir.iterdir():
        if item.name in skip:
            continue
        if item.is_dir():
            shutil.copytree(item, reports_dir / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, reports_dir / item.name)


def remove_scratch(run_dir: Path) -> None:
    """Delete one run's scratch directory (best effort: a leftover is harmless)."""
    shutil.rmtree(run_dir, ignore_errors=True)


def join_messages(messages: list[str], each: int = 1500, limit: int = 2 * MAX_ERROR_CHARS) -> str:
    """Error messages joined, each cut to `each` characters, so every file named survives.

    A long message loses its middle, not an end: RSpec states the error at the start of a load
    failure, pytest at the end of a collection traceback, and the model needs both.
    """
    parts = [shorten_middle(m.strip(), each) for m in messages if m.strip()]
    return "\n".join(parts)[:limit]


def shorten_middle(text: str, limit: int) -> str:
    """`text` within `limit` characters: its first third and last two thirds around a marker."""
    if len(text) <= limit:
        return text
    marker = "\n...\n"
    keep = max(0, limit - len(marker))
    head = keep // 3
    return text[:head] + marker + text[len(text) - (keep - head) :]


def tail(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """The last `limit` characters of `text`, stripped: errors are at the end of tool output."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def relative_path(path: str, repo: Path) -> str:
    """`path` relative to `repo` when it lies inside it, else unchanged (POSIX form)."""
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(repo.resolve()).as_posix()
        except ValueError:
            return path
    return p.as_posix()


def split_repeats(cmd: CommandResult, run_dir: Path, runs: int) -> list[CommandResult]:
    """One command result per run of a process that ran the tests `runs` times, from the
    ``run-N.json`` status (``{"exit", "seconds"}``) each run wrote in `run_dir`.

    The runs end at the first that exited non-zero. A run that wrote no status (the process
    was stopped, crashed or never got that far) gets the process's own result (its stop reason,
    the time left), and ends them. A finished run never carries the process's stop reason; the
    first carries the start-up when every run finished.
    """
    done: list[CommandResult] = []
    finished = {"reason": None, "timed_out": False}
    for index in range(1, runs + 1):
        try:
            status = json.loads((run_dir / f"run-{index}.json").read_text(encoding="utf-8"))
            exit_code, seconds = int(status["exit"]), float(status["seconds"])
        except (OSError, ValueError, TypeError, KeyError):
            spent = sum(c.duration_s for c in done)
            rest = cmd.model_copy(update={"duration_s": max(0.0, cmd.duration_s - spent)})
            done.append(rest if cmd.exit_code != 0 or cmd.reason else _died(rest))
            return done
        update = {"exit_code": exit_code, "duration_s": seconds, **finished}
        done.append(cmd.model_copy(update=update))
        if exit_code != 0:
            break
    start_up = max(0.0, cmd.duration_s - sum(c.duration_s for c in done))
    done[0] = done[0].model_copy(update={"duration_s": done[0].duration_s + start_up})
    return done


def _died(cmd: CommandResult) -> CommandResult:
    """The process exited 0 yet a run left no status: count it as a run that did not finish."""
    return cmd.model_copy(update={"exit_code": 1, "stderr": cmd.stderr + "\nrun left no status"})


def load_contexts(path: Path, repo: Path) -> LineContexts:
    """source -> test file -> lines, from a stack's contexts helper's JSON ``{test file:
    {source: [line, ...]}}`` (sources outside `repo` dropped; an unusable file is no evidence)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("%s: unusable test contexts (%s)", path, exc)
        return {}
    out: LineContexts = {}
    for test, files in data.items() if isinstance(data, dict) else []:
        if not isinstance(files, dict):
            continue
        test_rel = relative_path(str(test), repo).removeprefix("./")
        for file, lines in files.items():
            source = relative_path(str(file), repo)
            if source.startswith("/") or not isinstance(lines, list):
                continue
            numbers = {n for n in lines if isinstance(n, int)}
            out.setdefault(source, {}).setdefault(test_rel, set()).update(numbers)
    return out
