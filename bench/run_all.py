"""Run every benchmark in bench/ and print one table of their figures.

Each `*_bench.py` prints its own details and, as its last line, one JSON document
`{"bench": NAME, "figures": [{"name", "value", "baseline", "ratio", "target"}]}`; the target
bounds the ratio unless the figure says `"target_on": "value"`; a figure whose target is null
is shown for information (another figure bounds it). This script
collects those lines; a benchmark that fails or prints no such line is reported, not hidden.
Benchmarks measure: no test asserts a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent


def _run(script: Path) -> tuple[str, list[dict[str, object]] | str]:
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=BENCH_DIR.parent
    )
    sys.stderr.write(done.stdout)
    sys.stderr.write(done.stderr)
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "figures" in doc:
            return str(doc.get("bench", script.stem)), list(doc["figures"])
    return script.stem, f"failed (exit {done.returncode}): no figures printed"


def _verdict(figure: dict[str, object]) -> str:
    """The verdict against the figure's target ("yes", "NO"); "info" without one (shown for
    what it tells, bounded by another figure)."""
    target = figure.get("target")
    if target is None:
        return "info"
    measured = figure.get("value") if figure.get("target_on") == "value" else figure.get("ratio")
    ok = measured is not None and float(str(measured)) <= float(str(target))
    return "yes" if ok else "NO"


def main() -> int:
    table = Table(title="Test Autopilot benchmarks (baseline measured in the same run)")
    for col in ("bench", "figure", "value", "baseline", "ratio", "target", "ok"):
        table.add_column(col)
    failed = 0
    for script in sorted(BENCH_DIR.glob("*_bench.py")):
        name, figures = _run(script)
        if isinstance(figures, str):
            failed += 1
            table.add_row(name, figures, "", "", "", "", "NO")
            continue
        for f in figures:
            cells = [f.get(k) for k in ("name", "value", "baseline", "ratio", "target")]
            table.add_row(name, *("-" if c is None else str(c) for c in cells), _verdict(f))
    Console().print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
