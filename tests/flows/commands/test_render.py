"""Output that reads anywhere: in a non-terminal at 80 columns no path is ever folded.

The map, audit, nightly and repair tables are rendered from their recorded JSON documents
(tests/data/golden) with every path made long, through each command's own printer, as a CI
log would receive them; `map` also through the real console script at COLUMNS=80.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flows.commands import audit, map, nightly, repair
from flows.commands.render import Column, plain_table
from tasks.audit.report import AuditReport
from tasks.core.types import Mapping
from tasks.generate.report import NightlyReport
from tasks.repair.state import RepairSummary
from tests.paths import TESTS

GOLDEN = TESTS / "data" / "golden"
AUTOPILOT = Path(sys.executable).parent / "autopilot"
DEEP = "components/billing_and_invoicing/very_long_directory_name/another_level/"
_PATH = re.compile(r"\b((?:app|lib|spec|src|tests)/[\w/.\[\]-]+\.(?:rb|py))")


def _lengthen(value: Any, paths: set[str]) -> Any:
    """Every path made deep (and recorded); measured times back to numbers."""
    if isinstance(value, dict):
        return {k: _lengthen(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_lengthen(v, paths) for v in value]
    if value == "<seconds>":
        return 1.5
    if isinstance(value, str):
        new = _PATH.sub(lambda m: DEEP + m.group(1), value)
        paths.update(DEEP + m.group(1) for m in _PATH.finditer(value))
        return new
    return value


CASES: dict[str, tuple[str, Callable[[Any], Any], Callable[[Any], None]]] = {
    "map": ("map-rb", Mapping.model_validate, map._print_table),
    "audit": ("audit-rb", AuditReport.model_validate, audit._print_table),
    "nightly": ("nightly", NightlyReport.model_validate, nightly._print_table),
    "repair": ("repair", RepairSummary.model_validate, repair._print_summary),
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_every_path_whole_on_one_line_at_80_columns(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    golden, model, printer = CASES[command]
    paths: set[str] = set()
    doc = _lengthen(json.loads((GOLDEN / f"{golden}.json").read_text()), paths)
    printer(model(doc))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert paths, "the recorded document names no path"
    assert len(min(paths, key=len)) > 80  # longer than the width: folding would show
    table_paths = {p for p in paths if p in out}
    assert table_paths, out
    for path in table_paths:
        assert any(path in line for line in lines), f"{path} folded:\n{out}"
    # No line is a fragment of a path (what rich's fold left behind).
    assert not [line for line in lines if line.strip().startswith(("_name/", "level/"))]


def test_short_headers_in_the_nightly_table(capsys: pytest.CaptureFixture[str]) -> None:
    report = NightlyReport.model_validate(json.loads((GOLDEN / "nightly.json").read_text()))
    nightly._print_table(report)
    header = capsys.readouterr().out.splitlines()[1].split()
    assert header == ["file", "kind", "verdict", "gate", "iter", "cov", "judge", "tokens"]


def test_map_console_script_at_80_columns(tmp_path: Path) -> None:
    sources = [f"src/pkg/{DEEP}module_with_a_rather_long_name_{i}.py" for i in range(3)]
    for rel in [*sources, "pyproject.toml", "tests/test_x.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    done = subprocess.run(
        [str(AUTOPILOT), "map", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", "TERM": "xterm"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for source in sources:
        assert any(source in line for line in lines), done.stdout


def test_plain_table_widths_from_content_and_cells_kept_as_text() -> None:
    text = plain_table(
        "t",
        [Column("a"), Column("n", justify="right")],
        [["[bold]x[/bold]", 1], ["two\nlines", 22], [None, 3]],
    )
    assert text.splitlines() == [
        "t",
        "a                n",
        "[bold]x[/bold]   1",
        "two, lines      22",
        "-                3",
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AUTOPILOT), *args], capture_output=True, text=True, timeout=120, env=os.environ
    )


def test_version() -> None:
    from importlib.metadata import version

    done = _cli("--version")
    assert done.returncode == 0 and done.stdout == f"autopilot {version('test-autopilot')}\n"


def test_verbose_after_the_command(tmp_path: Path) -> None:
    from flows.cli import hoist_verbose

    assert hoist_verbose(["map", "--repo", ".", "-vv", "--", "-v"]) == [
        "-vv",
        "map",
        "--repo",
        ".",
        "--",
        "-v",
    ]
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    for args in (["map", "--repo", str(tmp_path), "-v"], ["-v", "map", "--repo", str(tmp_path)]):
        done = _cli(*args)
        assert done.returncode == 0, done.stderr


def test_log_lines_carry_a_timestamp() -> None:
    code = (
        "import logging; from flows.cli import _setup_logging; _setup_logging(1); "
        "logging.getLogger('tasks.generate.job').info('finished a file')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d INFO tasks\.generate\.job: finished a file\n",
        done.stderr,
    ), done.stderr


def test_progress_is_a_line_per_finished_file_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.commands.render import progress_on_stderr
    from flows.progress import finished, started

    with progress_on_stderr():
        started("nightly")
        finished(DEEP + "app/models/order.rb", "accepted", 1, 2)
        finished("app/models/[odd].rb", "rejected", 2, 2)
    finished("after the block", "not shown", 3, 3)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert "no Prefect UI" in lines[0]  # no run and no server here: said, not a broken URL
    assert re.fullmatch(rf"\d\d:\d\d:\d\d \[1/2\] {DEEP}app/models/order\.rb: accepted", lines[1])
    assert lines[2].endswith("[2/2] app/models/[odd].rb: rejected")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_narrow_terminal_a_long_path_is_never_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.commands.render import print_table

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "xterm")
    columns = [Column("file", path=True), Column("n")]
    wide, narrow = _Terminal(), _Terminal()
    print_table("t", columns, [[DEEP + "app/models/order.rb", 1]], stream=wide)
    print_table("t", columns, [["app/models/order.rb", 1]], stream=narrow)
    assert wide.getvalue() == plain_table("t", columns, [[DEEP + "app/models/order.rb", 1]])
    assert "┃" in narrow.getvalue() and "app/models/order.rb" in narrow.getvalue()
