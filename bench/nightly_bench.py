"""Benchmark: the nightly flow on a generated Python package against a slow scripted model.

A package of N generated modules (default 300), none tested; a scripted Mistral server on
127.0.0.1 answering every call after a fixed latency (default 100 ms) with a correct test file or
a judge verdict; model concurrency 16. Every file really goes through ruff, pytest with coverage
in the sandbox, the flakiness re-runs and the judge. Figures:

- first run: wall time against the ideal ``calls x latency / concurrency``, for information:
  it is bounded by the floor below, which is never less than the ideal;
- re-run on the unchanged repository: wall time against the first run (target <= 0.1x), with
  the number of model calls it made (must be 0);
- the whole-branch proof (the ``suite`` gate: accepted files run together with the suite,
  twice): its wall time against one run of the resulting suite alone (target <= 2x, the
  issue's bound on what it may add), and its share of the first run's wall time.

The ideal counts only model latency: on a small machine the real test runs (a pytest process
per run) dominate, and the ratio says by how much. A second figure compares the wall time with
the floor those runs set (the sampled files' lint, run, re-runs and mutants timed afterwards
with one file per core at a time, per file, times the files; or the ideal when larger): what
the orchestration adds on top of work that cannot be skipped (target <= 1.2). The mutation
scoring of each accepted file is part of that work; its share of a file's work (timed alone)
is a figure of its own (target <= 0.5). Prints details, then one JSON line
``{"bench": "nightly", "figures": [...]}`` for bench/run_all.py.

Usage: ``.venv/bin/python bench/nightly_bench.py [--files N] [--latency S] [--concurrency C]
[--flaky-runs R] [--judge-samples J] [--sandbox bwrap|none]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule  # noqa: E402

PYPROJECT = """\
[project]
name = "benchpkg"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
pythonpath = ["src"]
testpaths = ["tests"]

[tool.coverage.run]
source = ["benchpkg"]

[tool.ruff]
line-length = 100
"""
MODULE = '''\
"""Generated module {n}."""


def scale_{n}(x: int) -> int:
    """x times {n}, plus one; negative input is refused."""
    if x < 0:
        raise ValueError(f"negative: {{x}}")
    return x * {n} + 1
'''
TEST = """\
import pytest

from benchpkg.mod_{n:03d} import scale_{n}


def test_scale_{n}_of_two():
    assert scale_{n}(2) == {expected}


def test_scale_{n}_refuses_negative():
    with pytest.raises(ValueError, match="negative: -1"):
        scale_{n}(-1)
"""
_TASK = re.compile(r"# Task: test `src/benchpkg/mod_(\d+)\.py`")
JUDGE = json.dumps({"score": 0.8, "reasons": ["exact values"], "missing": []})


def make_package(root: Path, files: int) -> Path:
    """A git repository holding `files` untested modules."""
    pkg = root / "src" / "benchpkg"
    pkg.mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text('"""Shared fixtures (none yet)."""\n')
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (pkg / "__init__.py").write_text('"""Generated package."""\n', encoding="utf-8")
    for n in range(1, files + 1):
        (pkg / f"mod_{n:03d}.py").write_text(MODULE.format(n=n), encoding="utf-8")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True, capture_output=True)
    return root


def generator_reply(req: RecordedRequest) -> str:
    match = _TASK.search(req.text)
    if match is None:
        return "no file"
    n = int(match.group(1))
    test = TEST.format(n=n, expected=2 * n + 1)
    return f"tests/test_mod_{n:03d}.py\n```python\n{test}```\n"


def run_flow(repo: Path, concurrency: int) -> tuple[float, Any]:
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.nightly import nightly

    flow = nightly.with_options(task_runner=ThreadPoolTaskRunner(max_workers=concurrency))
    start = time.perf_counter()
    report = flow(repo=str(repo), archive=str(repo.parent / "archive"))
    return time.perf_counter() - start, report


def suite_alone_s(repo: Path, report: Any, sandbox: str) -> float:
    """Seconds of one run of the whole suite, every accepted file included, without coverage
    (what the whole-branch proof runs twice), on a copy with nothing else running."""
    import shutil

    from tasks.core.config import SandboxSettings
    from tasks.sandbox.make import make_runner
    from tasks.toolchains.registry import get_toolchain

    copy = repo.parent / "suite-alone"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    for f in report.files:
        if f.verdict == "accepted":
            for rel, text in f.files.items():
                (copy / rel).write_text(text, encoding="utf-8")
    runner = make_runner(SandboxSettings(backend=sandbox), root=copy, cache_dir=copy / ".cache")
    start = time.perf_counter()
    get_toolchain("python-pytest").run_specs(copy, [], None, runner, coverage=False)
    return time.perf_counter() - start


def serial_work_s(
    repo: Path, accepted: list[Any], flaky_runs: int, sandbox: str, name: str = "serial"
) -> float:
    """Seconds one file's sandboxed work takes with nothing else running: for the `accepted`
    files, the commands the nightly ran for them (lint with autocorrect, the run with coverage
    and the flakiness re-runs: one process when the stack repeats in one, as the nightly does),
    one after the other, no Prefect and no model; the mean."""
    import shutil

    from tasks.core.config import SandboxSettings
    from tasks.sandbox.make import make_runner
    from tasks.toolchains.registry import get_toolchain

    chain = get_toolchain("python-pytest")
    if not accepted:
        return 0.0
    copy = repo.parent / name
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    for f in accepted:
        for rel, text in f.files.items():
            (copy / rel).write_text(text, encoding="utf-8")
    runner = make_runner(SandboxSettings(backend=sandbox), root=copy, cache_dir=copy / ".cache")
    start = time.perf_counter()
    for f in accepted:
        chain.lint(copy, [f.spec], True, runner)
        if chain.repeats_in_one_process:
            chain.run_repeats(copy, [f.spec], f.source, runner, runs=1 + flaky_runs, coverage=True)
            continue
        chain.run_specs(copy, [f.spec], f.source, runner)
        for _ in range(flaky_runs):
            chain.run_specs(copy, [f.spec], f.source, runner, coverage=False)
    return (time.perf_counter() - start) / len(accepted)


def serial_mutation_s(
    repo: Path, accepted: list[Any], sandbox: str, name: str = "serial-mutants"
) -> float:
    """Seconds one accepted file's mutation scoring takes alone (the same mutants the nightly
    made, no cache), the mean over the `accepted` files: its share of a file's work."""
    import shutil

    from tasks.core.config import SandboxSettings
    from tasks.generate.mutation import mutation_score
    from tasks.sandbox.make import make_runner
    from tasks.toolchains.registry import get_toolchain

    chain = get_toolchain("python-pytest")
    accepted = [f for f in accepted if f.mutation and f.validation]
    if not accepted:
        return 0.0
    copy = repo.parent / name
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    runner = make_runner(SandboxSettings(backend=sandbox), root=copy, cache_dir=copy / ".cache")
    start = time.perf_counter()
    for f in accepted:
        for rel, text in f.files.items():
            (copy / rel).write_text(text, encoding="utf-8")
        tests = {rel: text for rel, text in f.files.items() if rel.startswith("tests/test_")}
        coverage = f.validation.coverage
        mutation_score(
            copy,
            f.source,
            coverage,
            tests,
            chain=chain,
            runner=runner,
            limit=f.mutation.made,
            cache_dir=None,
        )
    return (time.perf_counter() - start) / len(accepted)


def parallel_work_s(
    repo: Path, accepted: list[Any], flaky_runs: int, sandbox: str, workers: int
) -> float:
    """Seconds per file of the same sandboxed work (lint, run, re-runs, mutants) with `workers`
    files at a time, each worker on its own copy: what the machine's cores really give (two
    busy cores rarely do twice one core's work), still without Prefect or a model."""
    from concurrent.futures import ThreadPoolExecutor

    if not accepted:
        return 0.0
    chunks = [accepted[i::workers] for i in range(workers)]

    def one(i: int) -> None:
        serial_work_s(repo, chunks[i], flaky_runs, sandbox, name=f"parallel-{i}")
        serial_mutation_s(repo, chunks[i], sandbox, name=f"parallel-mutants-{i}")

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(workers)))
    return (time.perf_counter() - start) / len(accepted)


def warm_up() -> None:
    from prefect import flow

    @flow(name="nightly-bench-warm-up")
    def _warm() -> int:
        return 1

    _warm()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--flaky-runs", type=int, default=3)
    parser.add_argument("--judge-samples", type=int, default=3)
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap")
    parser.add_argument("--serial-sample", type=int, default=10, help="files timed serially")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nightly-bench-") as tmp:
        repo = make_package(Path(tmp) / "repo", args.files)
        server = MistralServer(latency_s=args.latency).start()
        server.add(Rule(schema_name="judge_verdict", replies=[JUDGE]))
        server.add(Rule(replies=[generator_reply]))
        for name in list(os.environ):
            if name.startswith(("AUTOPILOT_", "MISTRAL_")):
                del os.environ[name]
        os.environ.update(
            {
                "AUTOPILOT_HOME": str(Path(tmp) / "home"),
                "AUTOPILOT_MODEL_URL": server.url,
                "MISTRAL_API_KEY": "bench-key-not-real",
                "AUTOPILOT_MODEL__MAX_CONCURRENCY": str(args.concurrency),
                "AUTOPILOT_MODEL__JUDGE_SAMPLES": str(args.judge_samples),
                "AUTOPILOT_GATES__FLAKY_RUNS": str(args.flaky_runs),
                "AUTOPILOT_SANDBOX__BACKEND": args.sandbox,
                "PREFECT_HOME": str(Path(tmp) / "prefect"),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            }
        )
        from flows.runtime import flow_runtime

        try:
            with flow_runtime(False):
                warm_up()  # the ephemeral Prefect server starts here, outside the timings
                first_s, first = run_flow(repo, args.concurrency)
                calls = len(server.requests)
                rerun_s, second = run_flow(repo, args.concurrency)
                rerun_calls = len(server.requests) - calls
            sample = [f for f in first.files if f.verdict == "accepted"][: args.serial_sample]
            cores = os.cpu_count() or 1
            per_file = serial_work_s(repo, sample, args.flaky_runs, args.sandbox)
            suite_s = suite_alone_s(repo, first, args.sandbox)
            mutation = serial_mutation_s(repo, sample, args.sandbox)
            busy = parallel_work_s(repo, sample, args.flaky_runs, args.sandbox, cores)
        finally:
            server.stop()

    accepted = sum(1 for f in first.files if f.verdict == "accepted")
    ideal = calls * args.latency / args.concurrency
    # The floor the sandboxed work sets: the files' commands run on every core at once (one
    # file per core at a time, no Prefect, no model), per file, times the files.
    per_file += mutation  # the nightly scores mutants of every accepted file
    floor = max(ideal, busy * args.files)
    mutants = sum(f.mutation.made for f in first.files if f.mutation)
    print(f"files: {args.files}, accepted on the first run: {accepted}")
    print(f"first run: {first_s:.1f} s wall, {calls} model calls, ideal {ideal:.1f} s")
    print(
        f"one file's sandboxed work alone: {per_file:.2f} s; with {cores} files at a time "
        f"{busy:.2f} s per file ({per_file / cores:.2f} s if {cores} cores gave {cores}x); "
        f"x {args.files} files: floor {floor:.1f} s"
    )
    print(f"re-run: {rerun_s:.1f} s wall, {rerun_calls} model calls")
    share = mutation / per_file if per_file else 0.0
    print(
        f"mutation scoring: {mutants} mutants; {mutation:.2f} s of a file's {per_file:.2f} s "
        f"sandboxed work ({share:.0%}), about {share * first_s:.1f} s of the {first_s:.1f} s wall"
    )
    print(f"verdicts of the re-run: {sorted({f.verdict for f in second.files})}")
    proof = first.suite_proof
    proof_s = proof.seconds if proof is not None else 0.0
    print(
        f"whole-branch proof: {proof_s:.1f} s in {proof.runs if proof else 0} runs "
        f"({proof_s / first_s:.1%} of the first run); the suite alone: {suite_s:.1f} s; "
        f"dropped: {len(proof.dropped) if proof else 0}"
    )
    figures = [
        {
            "name": "first run wall / ideal (calls x latency / concurrency)",
            "value": round(first_s, 2),
            "baseline": round(ideal, 2),
            "ratio": round(first_s / ideal, 2) if ideal else None,
            # No target of its own: on a machine where the test runs outweigh the model's
            # latency (two cores, any real suite) the floor below is the bound that applies.
            "target": None,
        },
        {
            "name": "first run wall / floor (max of ideal, work on every core x files)",
            "value": round(first_s, 2),
            "baseline": round(floor, 2),
            "ratio": round(first_s / floor, 2) if floor else None,
            "target": 1.2,
        },
        {
            "name": "re-run wall / first run wall",
            "value": round(rerun_s, 2),
            "baseline": round(first_s, 2),
            "ratio": round(rerun_s / first_s, 3),
            "target": 0.1,
        },
        {
            "name": "whole-branch proof / one run of the suite alone",
            "value": round(proof_s, 2),
            "baseline": round(suite_s, 2),
            "ratio": round(proof_s / suite_s, 2) if suite_s else None,
            "target": 2.0,
        },
        {
            "name": "whole-branch proof share of the first run's wall time",
            "value": round(proof_s, 2),
            "baseline": round(first_s, 2),
            "ratio": round(proof_s / first_s, 3),
            "target": 1.0,
        },
        {
            "name": "mutation scoring share of a file's sandboxed work",
            "value": round(mutation, 2),
            "baseline": round(per_file, 2),
            "ratio": round(share, 3),
            "target": 0.5,
        },
        {
            "name": "re-run model calls",
            "value": rerun_calls,
            "baseline": 0,
            "ratio": None,
            "target": 0,
            "target_on": "value",
        },
    ]
    print(json.dumps({"bench": "nightly", "figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
