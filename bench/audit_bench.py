"""Benchmark: the audit's fixed overhead, `autopilot audit` against a plain pytest run of the
same one-test suite.

The project: a package with one function and one trivial test, in a git repository. The plain
run is ``python -m pytest -q`` with the interpreter the audit runs the tests with (Autopilot's
isolated one: pytest and coverage, nothing else). The audit is the whole ``autopilot audit
--repo X --json`` process: start-up, worktree, mapping, the sandboxed suite with coverage and
evidence, the coverage report, lint and static rubric, the report. Both sides run interleaved
(audit, plain, audit, plain, ...); the medians are compared. Target: the audit takes at most
3 s more than the plain run (an absolute target on the `_s` figure). Prints a table, then one
JSON line ``{"bench": "audit", "figures": [...]}``.

Usage: ``.venv/bin/python bench/audit_bench.py [--runs R]``
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

from tasks.toolchains.python.env import isolated_python

AUTOPILOT = Path(sys.executable).with_name("autopilot")
TARGET_OVERHEAD_S = 3.0


def make_project(root: Path) -> None:
    """A one-test package committed in a new git repository."""
    (root / "tiny").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "tiny"\nversion = "0.1"\n')
    (root / "tiny" / "__init__.py").write_text("def answer():\n    return 42\n")
    (root / "tests" / "test_tiny.py").write_text(
        "from tiny import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
    )
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "tiny"]):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env, capture_output=True)


def _timed(
    argv: list[str], cwd: Path, env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main() -> None:
    """Generate the project, measure both sides, print the table and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each side")
    args = parser.parse_args()
    if shutil.which("bwrap") is None:
        raise SystemExit("needs bwrap on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tiny"
        make_project(root)
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AUTOPILOT_", "PREFECT_API"))
        }
        env["AUTOPILOT_HOME"] = str(Path(tmp) / "home")
        python = isolated_python(Path(env["AUTOPILOT_HOME"]))
        plain_argv = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        audit_argv = [str(AUTOPILOT), "audit", "--repo", str(root), "--json"]
        plain_env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
        # One warm-up of each (page cache, the isolated environment).
        _timed(audit_argv, root, env)
        _timed(plain_argv, root, plain_env)
        audits: list[float] = []
        plains: list[float] = []
        for _ in range(args.runs):
            took, done = _timed(audit_argv, root, env)
            doc = json.loads(done.stdout) if done.returncode == 0 else None
            if doc is None or doc["summary"]["tests"]["passed"] != 1:
                raise SystemExit(f"audit failed (exit {done.returncode}): {done.stderr[-2000:]}")
            audits.append(took)
            took, done = _timed(plain_argv, root, plain_env)
            if done.returncode != 0 or "1 passed" not in done.stdout:
                raise SystemExit(f"plain pytest failed: {done.stdout}{done.stderr}")
            plains.append(took)
    audit_s, plain_s = statistics.median(audits), statistics.median(plains)
    overhead = audit_s - plain_s
    figures = [
        {
            "name": "audit_overhead_s",
            "value": round(overhead, 3),
            "baseline": round(plain_s, 3),
            "ratio": round(audit_s / plain_s, 2),
            "target": TARGET_OVERHEAD_S,
            "target_on": "value",
        }
    ]
    print(f"one-test suite; median of {args.runs} interleaved runs per side")
    print(
        f"audit {audit_s:.2f}s, plain pytest {plain_s:.2f}s, overhead {overhead:.2f}s "
        f"(target <= {TARGET_OVERHEAD_S}s): {'yes' if overhead <= TARGET_OVERHEAD_S else 'NO'}"
    )
    print(json.dumps({"bench": "audit", "figures": figures}))


if __name__ == "__main__":
    main()
