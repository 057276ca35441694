"""Benchmark: a nightly killed mid-way and started again, against one never interrupted.

A generated package of N untested modules (default 24, bench/nightly_bench.py's), a scripted
Mistral server on 127.0.0.1 answering after a fixed latency (default 100 ms), and one
``prefect server`` on loopback for every run (as operators run it). `autopilot nightly` runs as
a subprocess: once uninterrupted (its own AUTOPILOT_HOME), then on another copy killed with
SIGKILL to its process group when half of the files' outcomes are kept, and started again
(same home). Figures, the pair against the uninterrupted run measured in the same run:

- model requests sent by the pair / by the uninterrupted run (target 1.0: never a reply
  paid twice; a request in flight at the kill is the only one that may be sent again);
- wall time of the pair (until the kill, plus the whole second run) / uninterrupted
  (target <= 1.2).

Prints details, then one JSON line ``{"bench": "resume", "figures": [...]}``.

Usage: ``.venv/bin/python bench/resume_bench.py [--files N] [--latency S]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.nightly_bench import JUDGE, generator_reply, make_package  # noqa: E402
from tests.fakes.mistral_server import MistralServer, Rule  # noqa: E402

TARGET_CALLS = 1.0
TARGET_WALL = 1.2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prefect_server(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``prefect server start`` on loopback, waited for until healthy."""
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    exe = Path(sys.executable).parent / "prefect"
    argv = [str(exe), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as res:
                if res.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("prefect server did not become healthy")


def _env(server: MistralServer, home: Path, api: str, concurrency: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPILOT_", "MISTRAL_"))}
    env.update(
        AUTOPILOT_HOME=str(home),
        AUTOPILOT_MODEL_URL=server.url,
        MISTRAL_API_KEY="bench-key-not-real",
        AUTOPILOT_MODEL__MAX_CONCURRENCY=str(concurrency),
        AUTOPILOT_MODEL__JUDGE_SAMPLES="1",
        AUTOPILOT_GATES__FLAKY_RUNS="1",
        AUTOPILOT_GATES__MAX_MUTANTS="2",
        PREFECT_API_URL=api,
    )
    return env


def _argv(repo: Path, files: int) -> list[str]:
    exe = Path(sys.executable).parent / "autopilot"
    return [str(exe), "nightly", "--repo", str(repo), "--max-files", str(files), "--json"]


def _kept(home: Path) -> int:
    store = home / "cache" / "nightly"
    return len(list(store.glob("*.json"))) if store.is_dir() else 0


def run_whole(repo: Path, env: dict[str, str], files: int) -> tuple[float, dict]:  # type: ignore[type-arg]
    start = time.perf_counter()
    done = subprocess.run(_argv(repo, files), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nightly failed: {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def run_killed(repo: Path, env: dict[str, str], files: int, home: Path) -> float:
    """Seconds until the kill, which comes when half the files' outcomes are kept."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        _argv(repo, files), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    while _kept(home) < files // 2:
        if proc.poll() is not None:
            raise SystemExit("the run ended before it could be killed")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="autopilot-resume-bench-") as tmp:
        base = Path(tmp)
        prefect, api = prefect_server(base / "prefect")
        server = MistralServer(latency_s=args.latency).start()
        server.add(Rule(schema_name="judge_verdict", replies=[JUDGE]))
        server.add(Rule(replies=[generator_reply]))
        try:
            whole_repo = make_package(base / "whole", args.files)
            env = _env(server, base / "home-whole", api, args.concurrency)
            whole_s, whole_doc = run_whole(whole_repo, env, args.files)
            whole_calls = len(server.requests)
            pair_repo = make_package(base / "pair", args.files)
            env = _env(server, base / "home-pair", api, args.concurrency)
            killed_s = run_killed(pair_repo, env, args.files, base / "home-pair")
            killed_calls = len(server.requests) - whole_calls
            resumed_s, pair_doc = run_whole(pair_repo, env, args.files)
            pair_calls = len(server.requests) - whole_calls
        finally:
            server.stop()
            os.killpg(prefect.pid, signal.SIGKILL)
            prefect.wait()
    verdicts = [(f["source"], f["verdict"]) for f in whole_doc["files"]]
    same = verdicts == [(f["source"], f["verdict"]) for f in pair_doc["files"]]
    pair_s = killed_s + resumed_s
    print(f"uninterrupted: {whole_s:.1f} s, {whole_calls} model requests")
    print(f"killed after {killed_s:.1f} s ({killed_calls} requests), resumed in {resumed_s:.1f} s")
    print(f"pair: {pair_s:.1f} s, {pair_calls} requests; same verdicts: {same}")
    if not same:
        raise SystemExit("the resumed run's verdicts differ from the uninterrupted run's")
    figures = [
        {
            "name": f"killed+resumed model requests / uninterrupted ({args.files} files)",
            "value": pair_calls,
            "baseline": whole_calls,
            "ratio": round(pair_calls / whole_calls, 3),
            "target": TARGET_CALLS,
        },
        {
            "name": "killed+resumed wall / uninterrupted",
            "value": round(pair_s, 1),
            "baseline": round(whole_s, 1),
            "ratio": round(pair_s / whole_s, 3),
            "target": TARGET_WALL,
        },
    ]
    print(json.dumps({"bench": "resume", "figures": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
