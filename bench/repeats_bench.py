"""Benchmark: one file's sandboxed nightly work, today's five processes against one process
for the run with coverage and the flakiness re-runs.

On each example app (rails_shop with RSpec, py_inventory with pytest), one existing test file
goes through what the nightly runs for an accepted file, in the bwrap sandbox:

- before (the baseline, still callable): lint with autocorrect, the run with coverage
  (``run_specs``), then 3 flakiness re-runs (``run_specs(coverage=False)``), each its own
  process paying the framework's start (Rails boot for RSpec);
- after: lint with autocorrect, then ``run_repeats(runs=4, coverage=True)``: the run with
  coverage and the 3 re-runs in one process, one result per run.

The two are interleaved (before, after, before, ...) so drift on the host hits both alike, and
every run's results are checked (all passed, same examples) so a faster path that skipped work
would show. Target: after <= 0.6x before (medians). Prints details, then one JSON line
``{"bench": "repeats", "figures": [...]}``.

Usage: ``.venv/bin/python bench/repeats_bench.py [--rounds N] [--flaky-runs R]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.core.config import SandboxSettings  # noqa: E402
from tasks.core.types import ValidationResult  # noqa: E402
from tasks.sandbox.make import make_runner  # noqa: E402
from tasks.toolchains.base import CommandRunner, Toolchain  # noqa: E402
from tasks.toolchains.registry import get_toolchain  # noqa: E402

#: (example app, stack, test file, target source)
APPS = (
    ("rails_shop", "ruby-rspec", "spec/models/product_spec.rb", "app/models/product.rb"),
    ("py_inventory", "python-pytest", "tests/test_stock.py", "src/inventory/stock.py"),
)


def before(
    chain: Toolchain, repo: Path, spec: str, target: str, runner: CommandRunner, flaky_runs: int
) -> list[ValidationResult]:
    """Today's path: lint, the run with coverage, then each re-run in its own process."""
    chain.lint(repo, [spec], True, runner)
    runs = [chain.run_specs(repo, [spec], target, runner)]
    for _ in range(flaky_runs):
        runs.append(chain.run_specs(repo, [spec], target, runner, coverage=False))
    return runs


def after(
    chain: Toolchain, repo: Path, spec: str, target: str, runner: CommandRunner, flaky_runs: int
) -> list[ValidationResult]:
    """One process for the run with coverage and the re-runs (what the nightly runs now)."""
    chain.lint(repo, [spec], True, runner)
    return chain.run_repeats(repo, [spec], target, runner, runs=1 + flaky_runs, coverage=True)


def check(runs: list[ValidationResult], flaky_runs: int, label: str) -> None:
    """Every run passed with the same examples, and the first measured the target."""
    ids = [sorted(e.id for e in r.examples) for r in runs]
    if (
        len(runs) != 1 + flaky_runs
        or not all(r.passed for r in runs)
        or len(set(map(tuple, ids))) != 1
    ):
        raise SystemExit(f"{label}: runs differ or failed: {[r.passed for r in runs]}")
    if runs[0].coverage is None:
        raise SystemExit(f"{label}: the first run measured no coverage")


def measure(
    app: str, stack: str, spec: str, target: str, rounds: int, flaky_runs: int, tmp: Path
) -> dict[str, object]:
    repo = tmp / app
    shutil.copytree(ROOT / "examples" / app, repo)
    chain = get_toolchain(stack)
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=300), root=repo, cache_dir=tmp / f"{app}-cache"
    )
    after(chain, repo, spec, target, runner, flaky_runs)  # warm-up: prepared envs, disk caches
    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, path in (("before", before), ("after", after)):
            start = time.perf_counter()
            runs = path(chain, repo, spec, target, runner, flaky_runs)
            times[label].append(time.perf_counter() - start)
            check(runs, flaky_runs, f"{app} {label}")
    old, new = statistics.median(times["before"]), statistics.median(times["after"])
    print(
        f"{app} ({stack}, {spec}): before {[round(t, 2) for t in times['before']]} s, "
        f"after {[round(t, 2) for t in times['after']]} s; medians {old:.2f} -> {new:.2f} s"
    )
    return {
        "name": f"{app}: one file's sandboxed work (lint, run with coverage, "
        f"{flaky_runs} re-runs), one process / separate processes",
        "value": round(new, 2),
        "baseline": round(old, 2),
        "ratio": round(new / old, 2),
        "target": 0.6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flaky-runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="repeats-bench-") as tmp:
        figures = [measure(*app, args.rounds, args.flaky_runs, Path(tmp)) for app in APPS]
    print(json.dumps({"bench": "repeats", "figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
