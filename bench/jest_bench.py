"""Benchmark: a Jest run of the node-jest toolchain through the bwrap sandbox against the same
run as a plain subprocess.

The project is a copy of examples/node_orders (TypeScript through ts-jest with type checking,
supertest over loopback, one jsdom suite: 4 test files, 18 tests), run the way the toolchain
runs a suite: the generated Jest configuration, istanbul JSON coverage of every source,
jest-junit and Jest's JSON result, ``--maxWorkers=2``. Both sides share Jest's transform cache
(warmed once), and alternate (sandbox, plain, sandbox, plain, ...) so drift on the host hits
both alike; medians are compared. The sandboxed time is measured around ``Runner.run``: the
view (the toolchain directory bound read-only), namespaces, prlimit, output capture and
redaction. Target: sandbox overhead <= 1.10x the plain run. Prints a table, then one JSON line
``{"bench": "jest", "figures": [...]}``.

Usage: ``.venv/bin/python bench/jest_bench.py [--runs R]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.node.jest import default_config, jest_argv, jest_env
from tasks.toolchains.node.run import coverage_sources
from tasks.toolchains.node.tools import resolve_tools

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "node_orders"
EXPECT = '"numPassedTests":18'


def _project(root: Path) -> Path:
    repo = root / "orders"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("node_modules", "coverage"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo.resolve()


def main() -> None:
    """Copy the example, measure both sides, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each side")
    args = parser.parse_args()
    if shutil.which("bwrap") is None:
        raise SystemExit("needs bwrap on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        repo = _project(Path(tmp))
        tools = resolve_tools(repo)
        scratch = repo / ".autopilot-tmp"
        run_dir = scratch / "bench"
        run_dir.mkdir(parents=True)
        config = default_config(repo, tools, coverage_sources(repo), scratch / "jest-cache")
        config_file = scratch / "jest.config.json"
        config_file.write_text(json.dumps(config))
        argv = jest_argv(tools, run_dir, config=config_file, specs=[])
        env = jest_env(tools, run_dir)
        runner = make_runner(
            SandboxSettings(backend="bwrap", timeout_s=300),
            repo,
            toolchain_dirs=tools.sandbox_dirs(),
            cache_dir=Path(tmp) / "cache",
        )
        plain_env = {**os.environ, **env}
        # Warm-up of each side: Jest's transform cache and the page cache.
        runner.run(argv, cwd=repo, env=env)
        subprocess.run(argv, cwd=repo, env=plain_env, capture_output=True, check=False)
        sandboxed: list[float] = []
        plain: list[float] = []
        for _ in range(args.runs):
            start = time.perf_counter()
            res = runner.run(argv, cwd=repo, env=env)
            sandboxed.append(time.perf_counter() - start)
            _check("sandboxed", res.exit_code, run_dir, res.stderr)
            start = time.perf_counter()
            done = subprocess.run(argv, cwd=repo, env=plain_env, capture_output=True, text=True)
            plain.append(time.perf_counter() - start)
            _check("plain", done.returncode, run_dir, done.stderr)
    sandbox_s, plain_s = statistics.median(sandboxed), statistics.median(plain)
    figure = {
        "name": "jest_sandboxed_s",
        "value": round(sandbox_s, 4),
        "baseline": round(plain_s, 4),
        "ratio": round(sandbox_s / plain_s, 3),
        "target": 1.10,
    }
    print(f"jest on examples/node_orders (18 tests, coverage); median of {args.runs} runs")
    print(f"{'figure':<20}{'sandboxed':>12}{'plain':>12}{'ratio':>8}")
    print(f"{figure['name']:<20}{sandbox_s:>12.3f}{plain_s:>12.3f}{figure['ratio']:>8}")
    print(json.dumps({"bench": "jest", "figures": [figure]}))


def _check(side: str, exit_code: int, run_dir: Path, stderr: str) -> None:
    result = (run_dir / "jest.json").read_text(encoding="utf-8") if exit_code == 0 else ""
    if EXPECT not in result.replace(" ", ""):
        raise SystemExit(f"{side} jest run failed (exit {exit_code}): {stderr[-2000:]}")


if __name__ == "__main__":
    main()
