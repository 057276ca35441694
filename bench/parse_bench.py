"""Benchmark: `autopilot parse --json` against plain junitparser on a 200,000-case report.

Both sides run as subprocesses, each inside a fresh wrapper process that reads the child's peak
RSS from ``getrusage(RUSAGE_CHILDREN)`` (so one measurement cannot inherit another's peak).
The baseline loads the file with ``junitparser.JUnitXml.fromfile`` and reads name, classname,
time and result of every case: the least a tool built on junitparser has to do. Targets: time
<= 2x the baseline, peak memory <= 0.6x. Prints a table, then one JSON line
``{"bench": "parse", "figures": [...]}`` for `make bench`.

Usage: ``.venv/bin/python bench/parse_bench.py [--cases N] [--runs R]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

ROOT = Path(__file__).resolve().parents[1]
AUTOPILOT = ROOT / ".venv" / "bin" / "autopilot"

_WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
with open(sys.argv[1], "wb") as out:
    code = subprocess.run(sys.argv[2:], stdout=out).returncode
wall = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": code, "wall": wall, "rss_mb": peak_kb / 1024}))
"""

_BASELINE = """
import sys
from junitparser import JUnitXml, TestSuite
xml = JUnitXml.fromfile(sys.argv[1])
suites = [xml] if isinstance(xml, TestSuite) else list(xml)
n = 0
for suite in suites:
    for case in suite:
        _ = (case.name, case.classname, case.time, [r.message for r in case.result])
        n += 1
print(n)
"""

_TRACE = (
    "java.lang.AssertionError: expected:<{a}> but was:<{b}>\n"
    "\tat org.junit.Assert.fail(Assert.java:89)\n"
    "\tat org.junit.Assert.failNotEquals(Assert.java:835)\n"
    "\tat org.junit.Assert.assertEquals(Assert.java:120)\n"
    "\tat com.example.shop.Cart{k}Test.total(Cart{k}Test.java:{line})\n"
    "\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)\n"
    "\tat org.junit.runners.ParentRunner.run(ParentRunner.java:413)\n"
)


def generate(path: Path, cases: int) -> None:
    """Write a Surefire-style report: 1,000 cases per suite, ~10% failures, 2% errors/skips."""
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="bench">\n')
        for i in range(cases):
            if i % 1000 == 0:
                if i:
                    f.write("</testsuite>\n")
                f.write(f'<testsuite name="com.example.shop.Suite{i // 1000}" tests="1000">\n')
            k = i % 97
            head = (
                f'<testcase name="total_{i}" classname="com.example.shop.Cart{k}Test" '
                f'time="0.{i % 1000:03d}"'
            )
            if i % 10 == 3:
                trace = _TRACE.format(a=i, b=i + 1, k=k, line=10 + i % 200)
                f.write(
                    f"{head}><failure message={quoteattr(f'expected:<{i}> but was:<{i + 1}>')} "
                    f'type="java.lang.AssertionError">{escape(trace)}</failure>'
                    f"<system-out>cart {i} total computed\n</system-out></testcase>\n"
                )
            elif i % 50 == 7:
                f.write(
                    f'{head}><error message="boom" type="java.lang.IllegalStateException">'
                    f"{escape(_TRACE.format(a=0, b=1, k=k, line=99))}</error></testcase>\n"
                )
            elif i % 50 == 9:
                f.write(f'{head}><skipped message="disabled"/></testcase>\n')
            else:
                f.write(f"{head}/>\n")
        f.write("</testsuite>\n</testsuites>\n")


def measure(argv: list[str], out: Path) -> dict[str, float]:
    """Run argv under a fresh wrapper; return its wall time (s) and peak RSS (MB)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(out), *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    if result["code"] != 0:
        raise SystemExit(f"{argv[0]} exited {result['code']}")
    return result


def main() -> None:
    """Generate the report, measure both sides, print the table and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        generate(report, args.cases)
        size_mb = report.stat().st_size / 2**20
        ours = [
            measure([str(AUTOPILOT), "parse", "--json", str(report)], Path(tmp) / "out.json")
            for _ in range(args.runs)
        ]
        parsed = json.loads((Path(tmp) / "out.json").read_text())
        if parsed["summary"]["tests"] != args.cases:
            raise SystemExit(f"autopilot parsed {parsed['summary']['tests']} cases")
        base = [
            measure([sys.executable, "-c", _BASELINE, str(report)], Path(tmp) / "base.txt")
            for _ in range(args.runs)
        ]
        if int((Path(tmp) / "base.txt").read_text()) != args.cases:
            raise SystemExit("baseline did not read every case")

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    figures: list[dict[str, Any]] = [
        {
            "name": "parse_wall_s",
            "value": round(med(ours, "wall"), 3),
            "baseline": round(med(base, "wall"), 3),
            "target": 2.0,
        },
        {
            "name": "parse_peak_rss_mb",
            "value": round(med(ours, "rss_mb"), 1),
            "baseline": round(med(base, "rss_mb"), 1),
            "target": 0.6,
        },
    ]
    for fig in figures:
        fig["ratio"] = round(fig["value"] / fig["baseline"], 3)
    print(f"report: {args.cases} cases, {size_mb:.1f} MB; median of {args.runs} runs")
    print(f"{'figure':<20}{'autopilot':>12}{'junitparser':>14}{'ratio':>8}{'target':>8}  ok")
    for fig in figures:
        ok = "yes" if fig["ratio"] <= fig["target"] else "NO"
        print(
            f"{fig['name']:<20}{fig['value']:>12}{fig['baseline']:>14}"
            f"{fig['ratio']:>8}{'<=' + str(fig['target']):>8}  {ok}"
        )
    print(json.dumps({"bench": "parse", "figures": figures}))


if __name__ == "__main__":
    main()
