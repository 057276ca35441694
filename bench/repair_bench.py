"""Benchmark: the repair auditor validating a patch it has validated before (an identical diff:
the validation cache hit) against the first validation of that patch, in the same run.

The project is a copy of examples/py_inventory with a merged regression (a volume discount
changed from 5 % to 6 %) and its real failing report; the patch restores 5 %. Each repetition
uses a fresh AUTOPILOT_HOME, so its first audit is really uncached: worktree, `git apply`,
syntax check and the sandboxed pytest re-run of the affected test file. The second audit of the
same (commit, patch, specs) takes the stored result: it still makes the worktree and checks the
patch (those are never skipped), but runs no test. Target: the hit costs <= 0.5x the first.
Prints a table, then one JSON line ``{"bench": "repair", "figures": [...]}``.

Usage: ``.venv/bin/python bench/repair_bench.py [--runs R]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.core.config import load_settings  # noqa: E402
from tasks.facts.reports.read import parse_reports  # noqa: E402
from tasks.repair.review import review_patch  # noqa: E402
from tasks.repair.scout import group_failures  # noqa: E402
from tasks.toolchains.registry import toolchain_for  # noqa: E402
from tests.flows.test_post_merge import patch_to, regressed_repo  # noqa: E402

TARGET_RATIO = 0.5


def main() -> None:
    """Build the regressed project, audit the fix twice per fresh home, print table and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repetitions (fresh cache each)")
    args = parser.parse_args()
    patch = patch_to(5).removeprefix("```diff\n").removesuffix("```\n")
    firsts: list[float] = []
    hits: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        repo, report, head = regressed_repo(Path(tmp))
        cases = parse_reports([report], repo=repo).cases
        failing = [c for c in cases if c.status in ("failed", "error")]
        [group] = group_failures(
            failing, toolchain_for(load_settings(repo), "python-pytest").file_rules(repo)
        )
        for i in range(args.runs + 1):  # the first repetition is a warm-up, not counted
            settings = load_settings(repo, {"home": Path(tmp) / f"home-{i}"})
            kwargs = {
                "repo_root": repo,
                "sub": "",
                "base_commit": head,
                "chain": toolchain_for(settings, "python-pytest"),
                "patch": patch,
                "group": group,
                "diagnosis": None,
                "known_failures": [],
                "settings": settings,
            }
            start = time.perf_counter()
            first = review_patch(**kwargs)  # type: ignore[arg-type]
            first_s = time.perf_counter() - start
            start = time.perf_counter()
            second = review_patch(**kwargs)  # type: ignore[arg-type]
            hit_s = time.perf_counter() - start
            if (first.verdict, first.cached, second.verdict, second.cached) != (
                "PASSED",
                False,
                "PASSED",
                True,
            ):
                raise SystemExit(f"unexpected audits: {first.verdict} then {second.verdict}")
            if i:
                firsts.append(first_s)
                hits.append(hit_s)
    first_med, hit_med = statistics.median(firsts), statistics.median(hits)
    figures = [
        {
            "name": "identical_diff_audit_s",
            "value": round(hit_med, 4),
            "baseline": round(first_med, 4),
            "ratio": round(hit_med / first_med, 3),
            "target": TARGET_RATIO,
        }
    ]
    print(f"repair audit of one patch (py_inventory, bwrap); median of {args.runs} fresh caches")
    print(f"{'figure':<26}{'value':>10}{'baseline':>10}{'ratio':>8}{'target':>9}  ok")
    for fig in figures:
        ok = "yes" if float(fig["ratio"]) <= float(fig["target"]) else "NO"
        print(
            f"{fig['name']:<26}{fig['value']:>10}{fig['baseline']:>10}"
            f"{fig['ratio']:>8}{'<=' + str(fig['target']):>9}  {ok}"
        )
    print(json.dumps({"bench": "repair", "figures": figures}))


if __name__ == "__main__":
    main()
