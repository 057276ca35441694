"""Benchmark: the same nightly on one process and on a two-worker Dask cluster.

The generated package of bench/nightly_bench.py (N untested modules, default 60) against a
scripted model (100 ms a call), run twice from scratch: on this process's threads, then with
its file jobs on a real cluster (``dask scheduler`` and two ``dask worker`` processes on
loopback, each with 8 threads, the flows on a real ``prefect server``: Dask worker processes
cannot use the ephemeral one). Each run's wall time is set against its floor: the sampled
files' sandboxed work (lint, run with coverage, re-runs, mutants) with one file per core at a
time, per file, times the files; both runs share this machine's cores, so the floor is the
same, and the ratio says what each orchestration adds on top of work that cannot be skipped
(targets: one process <= 1.2, as the nightly bench; the cluster <= 1.5, for its per-task
scheduling, the workers' own start of each run and the Prefect API over HTTP). The sandbox's
slots are split between the processes (``sandbox.max_parallel`` = cores / workers on the
cluster), as an operator sizes workers sharing one machine. Prints details, then one JSON line
``{"bench": "cluster", "figures": [...]}`` for bench/run_all.py.

Usage: ``.venv/bin/python bench/cluster_bench.py [--files N] [--latency S]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from nightly_bench import JUDGE, generator_reply, make_package, parallel_work_s  # noqa: E402

from tests.dask_cluster import dask_cluster  # noqa: E402
from tests.fakes.mistral_server import MistralServer, Rule  # noqa: E402
from tests.infra.test_infra import PrefectServer  # noqa: E402

WORKERS = 2
THREADS = 8


def run_nightly(repo: Path, dask: str | None, concurrency: int) -> tuple[float, Any]:
    from flows.nightly import nightly
    from flows.runtime import SHARED_MODEL_LIMIT
    from flows.workers import on_task_runner

    flow = on_task_runner(nightly, dask, concurrency)
    limit = SHARED_MODEL_LIMIT if dask else None
    start = time.perf_counter()
    report = flow(repo=str(repo), archive=str(repo.parent / "archive"), shared_model_limit=limit)
    return time.perf_counter() - start, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--flaky-runs", type=int, default=3)
    parser.add_argument("--serial-sample", type=int, default=8)
    args = parser.parse_args()
    cores = os.cpu_count() or 1

    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        work = Path(tmp)
        model = MistralServer(latency_s=args.latency).start()
        model.add(Rule(schema_name="judge_verdict", replies=[JUDGE]))
        model.add(Rule(replies=[generator_reply]))
        prefect = PrefectServer(work / "prefect-server").start()
        for name in list(os.environ):
            if name.startswith(("AUTOPILOT_", "MISTRAL_", "PREFECT_")):
                del os.environ[name]
        settings = {
            "AUTOPILOT_MODEL_URL": model.url,
            "MISTRAL_API_KEY": "bench-key-not-real",
            "AUTOPILOT_MODEL__MAX_CONCURRENCY": str(args.concurrency),
            "AUTOPILOT_GATES__FLAKY_RUNS": str(args.flaky_runs),
            "AUTOPILOT_SANDBOX__BACKEND": "bwrap",
        }
        os.environ.update(settings)
        os.environ.update(prefect.env(PREFECT_HOME=str(work / "prefect-client")))
        worker_env = prefect.env(PYTHONPATH=str(ROOT), MISTRAL_API_KEY="bench-key-not-real")
        worker_env["PREFECT_HOME"] = str(work / "prefect-workers")
        walls: dict[str, float] = {}
        reports: dict[str, Any] = {}
        try:
            from flows.runtime import flow_runtime

            with flow_runtime(False):
                for where in ("one process", "two workers"):
                    repo = make_package(work / where.replace(" ", "-") / "repo", args.files)
                    os.environ["AUTOPILOT_HOME"] = str(repo.parent / "home")
                    if where == "one process":
                        walls[where], reports[where] = run_nightly(repo, None, args.concurrency)
                        continue
                    slots = str(max(1, cores // WORKERS))
                    os.environ["AUTOPILOT_SANDBOX__MAX_PARALLEL"] = slots
                    with dask_cluster(
                        work / "dask", worker_env, workers=WORKERS, threads=THREADS
                    ) as cluster:
                        walls[where], reports[where] = run_nightly(repo, cluster.address, THREADS)
            first = reports["one process"]
            sample = [f for f in first.files if f.verdict == "accepted"][: args.serial_sample]
            busy = parallel_work_s(
                work / "one-process" / "repo", sample, args.flaky_runs, "bwrap", cores
            )
        finally:
            model.stop()
            prefect.stop()

    floor = busy * args.files
    figures = []
    for where, wall in walls.items():
        report = reports[where]
        accepted = sum(1 for f in report.files if f.verdict == "accepted")
        print(f"{where}: {wall:.1f} s wall, {accepted}/{args.files} accepted, floor {floor:.1f} s")
        figures.append(
            {
                "name": f"nightly of {args.files} files on {where} / floor",
                "value": round(wall, 2),
                "baseline": round(floor, 2),
                "ratio": round(wall / floor, 2) if floor else None,
                "target": 1.2 if where == "one process" else 1.5,
            }
        )
    verdicts = {w: sorted({f.verdict for f in r.files}) for w, r in reports.items()}
    print(f"verdicts: {verdicts}")
    figures.append(
        {
            "name": "cluster wall / one process wall",
            "value": round(walls["two workers"], 2),
            "baseline": round(walls["one process"], 2),
            "ratio": round(walls["two workers"] / walls["one process"], 2),
            "target": None,
        }
    )
    print(json.dumps({"bench": "cluster", "figures": figures}))
    same = verdicts["one process"] == verdicts["two workers"] == ["accepted"]
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
