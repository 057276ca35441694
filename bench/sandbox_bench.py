"""Benchmark: real test runs through the bwrap sandbox against the same runs as plain
subprocesses, and the time of a result-cache hit.

Two stacks: rspec (Debian's Ruby, the system trees of the view) and pytest with Autopilot's own
interpreter (its venv and base interpreter bound by their exact directories). Each side runs a
generated tiny test directory (a few files, a few dozen examples), interleaved (sandbox, plain,
sandbox, plain, ...) so drift on the host hits both alike; the medians are compared. The
sandboxed time is measured around `Runner.run`, so it includes everything the sandbox adds: the
view (deny by default: a few dozen binds), cgroup set-up and removal, bwrap's namespaces and
mounts, prlimit, output capture and redaction. Targets: sandbox overhead <= 1.10x the plain run;
a cache hit < 50 ms (an absolute target for the `_ms` figure). Prints a table, then one JSON line
``{"bench": "sandbox", "figures": [...]}``.

With a Docker engine, one more row: the same run through the docker backend (a container of
the worker image per run), against bwrap's median.

Usage: ``.venv/bin/python bench/sandbox_bench.py [--runs R]``
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
from tasks.sandbox.base import Runner
from tasks.sandbox.cache import cache_key
from tasks.sandbox.make import make_runner

SPEC = """
RSpec.describe "calculator {n}" do
{examples}
end
"""
#: pytest as the python toolchain runs it: no bytecode, no plugins of Autopilot's venv.
PYTEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def make_project(root: Path, files: int = 4, examples: int = 10) -> None:
    """A tiny spec directory: `files` spec files with `examples` passing examples each."""
    (root / "spec").mkdir(parents=True)
    for n in range(files):
        body = "\n".join(
            f"  it('adds {i}') {{ expect({i} + {n}).to eq({i + n}) }}" for i in range(examples)
        )
        (root / "spec" / f"calc_{n}_spec.rb").write_text(SPEC.format(n=n, examples=body))


def docker_figure(
    root: Path, argv: list[str], bwrap_s: float, runs: int, cache: Path
) -> dict | None:
    """The same rspec run through the docker backend (a fresh container of the worker image
    per run) against bwrap's median from this run; None, with the reason on stderr, when no
    engine answers. The image is built offline and cached like the tests' (tests/docker_images)."""
    from tests.docker_images import built_image, engine_problem

    problem = engine_problem()
    if problem is not None:
        print(f"docker row skipped: {problem}", file=sys.stderr)
        return None
    settings = SandboxSettings(
        backend="docker", timeout_s=120, docker_image=built_image("test-autopilot-worker")
    )
    runner = make_runner(settings, root, cache_dir=cache)
    docker_argv = ["rspec", *argv[1:]]  # the image's own rspec
    runner.run(docker_argv, cwd=root)  # warm-up: the first container pays for cold layers
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        res = runner.run(docker_argv, cwd=root)
        times.append(time.perf_counter() - start)
        if res.exit_code != 0 or "40 examples, 0 failures" not in res.stdout:
            raise SystemExit(f"docker rspec failed: {res.stderr or res.stdout}")
    docker_s = statistics.median(times)
    return {
        "name": "rspec_docker_s",
        "value": round(docker_s, 4),
        "baseline": round(bwrap_s, 4),
        "ratio": round(docker_s / bwrap_s, 3),
        # A container per run costs its start-up (about 0.2 s here); the target bounds that.
        "target": 3.0,
    }


def make_py_project(root: Path, files: int = 4, examples: int = 10) -> None:
    """The same for pytest: `files` test modules with `examples` passing tests each."""
    (root / "tests").mkdir(parents=True)
    for n in range(files):
        body = "\n".join(
            f"def test_adds_{i}():\n    assert {i} + {n} == {i + n}\n" for i in range(examples)
        )
        (root / "tests" / f"test_calc_{n}.py").write_text(body)


def interleaved(
    runner: Runner, argv: list[str], root: Path, runs: int, expect: str, env: dict[str, str]
) -> tuple[float, float]:
    """Median seconds of `runs` sandboxed and plain runs of `argv`, alternating."""
    plain_env = {**os.environ, **env}
    # One warm-up of each: the first start pays for cold page cache.
    runner.run(argv, cwd=root, env=env)
    subprocess.run(argv, cwd=root, env=plain_env, capture_output=True, check=False)
    sandboxed: list[float] = []
    plain: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        res = runner.run(argv, cwd=root, env=env)
        sandboxed.append(time.perf_counter() - start)
        if res.exit_code != 0 or expect not in res.stdout:
            raise SystemExit(f"sandboxed {argv[0]} failed: {res.stderr or res.stdout}")
        start = time.perf_counter()
        done = subprocess.run(
            argv, cwd=root, env=plain_env, capture_output=True, text=True, check=False
        )
        plain.append(time.perf_counter() - start)
        if done.returncode != 0 or expect not in done.stdout:
            raise SystemExit(f"plain {argv[0]} failed: {done.stderr or done.stdout}")
    return statistics.median(sandboxed), statistics.median(plain)


def ratio_figure(name: str, sandbox_s: float, plain_s: float) -> dict[str, object]:
    return {
        "name": name,
        "value": round(sandbox_s, 4),
        "baseline": round(plain_s, 4),
        "ratio": round(sandbox_s / plain_s, 3),
        "target": 1.10,
    }


def main() -> None:
    """Generate the projects, measure both sides and the cache, print the table and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="repetitions of each side")
    args = parser.parse_args()
    rspec = shutil.which("rspec")
    if rspec is None or shutil.which("bwrap") is None:
        raise SystemExit("needs rspec and bwrap on PATH")
    argv = [rspec, "--format", "progress"]
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        make_project(root)
        make_py_project(root)
        runner = make_runner(
            SandboxSettings(backend="bwrap", timeout_s=120), root, cache_dir=Path(tmp) / "cache"
        )
        sandbox_s, plain_s = interleaved(runner, argv, root, args.runs, "40 examples, 0 fail", {})
        py_sandbox_s, py_plain_s = interleaved(
            runner, pytest_argv, root, args.runs, "40 passed", PYTEST_ENV
        )
        key = cache_key("bench-commit", "", argv)
        first = runner.run(argv, cwd=root, cache_key=key)
        hits: list[float] = []
        for _ in range(args.runs):
            start = time.perf_counter()
            hit = runner.run(argv, cwd=root, cache_key=key)
            hits.append(time.perf_counter() - start)
            if not hit.cached or hit.stdout != first.stdout:
                raise SystemExit("cache hit expected")
        docker_row = docker_figure(root, argv, sandbox_s, args.runs, Path(tmp) / "docker-cache")

    hit_ms = statistics.median(hits) * 1000
    figures = [
        ratio_figure("rspec_sandboxed_s", sandbox_s, plain_s),
        ratio_figure("pytest_sandboxed_s", py_sandbox_s, py_plain_s),
        {
            "name": "cache_hit_ms",
            "value": round(hit_ms, 3),
            "baseline": round(sandbox_s * 1000, 1),
            "ratio": round(hit_ms / (sandbox_s * 1000), 4),
            "target": 50.0,
            "target_on": "value",
        },
    ]
    if docker_row is not None:
        figures.append(docker_row)
    print(f"rspec and pytest, 4 files, 40 examples each; median of {args.runs} interleaved runs")
    print(f"{'figure':<20}{'value':>12}{'baseline':>12}{'ratio':>9}{'target':>9}  ok")
    for fig in figures:
        measured = fig["value"] if fig.get("target_on") == "value" else fig["ratio"]
        ok = "yes" if float(measured) <= float(fig["target"]) else "NO"
        print(
            f"{fig['name']:<20}{fig['value']:>12}{fig['baseline']:>12}"
            f"{fig['ratio']:>9}{'<=' + str(fig['target']):>9}  {ok}"
        )
    print(json.dumps({"bench": "sandbox", "figures": figures}))


if __name__ == "__main__":
    main()
