"""Benchmark: `autopilot parse` against plain junitparser, large report and small report.

Large: a generated 200,000-case Surefire-style report. `autopilot parse --json` runs as a whole
process (start-up, parse, JSON out) against a whole process that loads the file with
``junitparser.JUnitXml.fromfile`` and reads name, classname, time and result of every case:
the least a tool built on junitparser has to do. junitparser 5 parses with lxml when lxml can
be imported and with the standard library's ElementTree otherwise, so the baseline's
installation is pinned and both are measured:

- ``junitparser 5.0.3, stdlib ElementTree``: the project's interpreter, lxml made unimportable;
- ``junitparser 5.0.3 + lxml 6.0.2``: a separate virtualenv made once with uv (skipped, and
  said so, when uv cannot make it).

Targets, against the faster baseline: wall time <= 1.0x, peak RSS <= 0.3x. Each measurement
runs inside a fresh wrapper process that reads the child's peak RSS (and its CPU time, printed
to tell a loaded machine from a slow parser) from ``getrusage(RUSAGE_CHILDREN)``, so one
measurement cannot inherit another's peak.

Small: `autopilot parse --json` of a 30 kB report against ``python -c`` loading it with
junitparser (stdlib), whole processes, median of many runs: start-up dominates both. Target
<= 2.0x.

Prints a table, then one JSON line ``{"bench": "parse", "figures": [...]}`` for `make bench`.

Usage: ``.venv/bin/python bench/parse_bench.py [--cases N] [--runs R] [--small-runs R]``
"""

from __future__ import annotations

import argparse
import json
import shutil
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
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps({"code": code, "wall": wall, "cpu": cpu, "rss_mb": usage.ru_maxrss / 1024}))
"""

#: Pinned baseline installations (see the module docstring).
JUNITPARSER = "junitparser==5.0.3"
LXML = "lxml==6.0.2"
LXML_VENV = Path(tempfile.gettempdir()) / "autopilot-bench" / "junitparser-5.0.3-lxml-6.0.2"

_NO_LXML = "import sys; sys.modules['lxml'] = None\n"

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
    """Run argv under a fresh wrapper; return its wall time and CPU time (s), peak RSS (MB)."""
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


def lxml_python() -> Path | None:
    """The interpreter of the pinned junitparser + lxml virtualenv, made once with uv."""
    python = LXML_VENV / "bin" / "python"
    probe = "import junitparser.junitparser as j; assert j.etree.__name__ == 'lxml.etree'"
    if python.exists() and subprocess.run([python, "-c", probe]).returncode == 0:
        return python
    uv = shutil.which("uv")
    if uv is None:
        print("note: uv not found: the junitparser + lxml baseline is skipped")
        return None
    made = subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(LXML_VENV)], capture_output=True
    )
    if made.returncode == 0:
        made = subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(python), JUNITPARSER, LXML],
            capture_output=True,
        )
    if made.returncode != 0 or subprocess.run([python, "-c", probe]).returncode != 0:
        print(f"note: cannot make the lxml baseline venv: {made.stderr.decode()[-300:]}")
        return None
    return python


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _figure(
    name: str, value: float, baseline: float, target: float, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 3),
        "baseline": round(baseline, 3),
        "ratio": round(value / baseline, 3),
        "target": target,
        **extra,
    }


def large(tmp: Path, cases: int, runs: int) -> list[dict[str, Any]]:
    """Figures for the large report: wall time and peak RSS against the faster baseline."""
    report = tmp / "report.xml"
    generate(report, cases)
    print(f"large report: {cases} cases, {report.stat().st_size / 2**20:.1f} MB; median of {runs}")
    baselines: dict[str, list[str]] = {
        "junitparser 5.0.3, stdlib ElementTree": [
            sys.executable,
            "-c",
            _NO_LXML + _BASELINE,
            str(report),
        ],
    }
    lxml = lxml_python()
    if lxml is not None:
        baselines["junitparser 5.0.3 + lxml 6.0.2"] = [str(lxml), "-c", _BASELINE, str(report)]
    measured: dict[str, list[dict[str, float]]] = {}
    # Interleaved, so a change in the machine's load hits every side alike.
    for _ in range(runs):
        ours = measure([str(AUTOPILOT), "parse", "--json", str(report)], tmp / "out.json")
        measured.setdefault("autopilot", []).append(ours)
        for label, argv in baselines.items():
            measured.setdefault(label, []).append(measure(argv, tmp / "base.txt"))
            if int((tmp / "base.txt").read_text()) != cases:
                raise SystemExit(f"{label} did not read every case")
    parsed = json.loads((tmp / "out.json").read_text())
    if parsed["summary"]["tests"] != cases:
        raise SystemExit(f"autopilot parsed {parsed['summary']['tests']} cases")
    for label, runs_ in measured.items():
        print(f"  {label:<40} wall {_median(runs_, 'wall'):6.3f} s   "
              f"cpu {_median(runs_, 'cpu'):6.3f} s   "
              f"peak RSS {_median(runs_, 'rss_mb'):7.1f} MB")  # fmt: skip
    base_labels = [k for k in measured if k != "autopilot"]
    fastest = min(base_labels, key=lambda k: _median(measured[k], "wall"))
    leanest = min(base_labels, key=lambda k: _median(measured[k], "rss_mb"))
    ours_runs = measured["autopilot"]
    return [
        _figure("parse_200k_wall_s", _median(ours_runs, "wall"),
                _median(measured[fastest], "wall"), 1.0, baseline_is=fastest),
        _figure("parse_200k_peak_rss_mb", _median(ours_runs, "rss_mb"),
                _median(measured[leanest], "rss_mb"), 0.3, baseline_is=leanest),
    ]  # fmt: skip


def small(tmp: Path, runs: int) -> dict[str, Any]:
    """The start-up figure: a 30 kB report, whole processes, medians."""
    report = tmp / "small.xml"
    generate(report, 200)
    ours_argv = [str(AUTOPILOT), "parse", "--json", str(report)]
    base_argv = [sys.executable, "-c", _NO_LXML + _BASELINE, str(report)]
    ours: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for _ in range(runs):
        ours.append(measure(ours_argv, tmp / "small.json"))
        base.append(measure(base_argv, tmp / "small.txt"))
    size_kb = report.stat().st_size / 1024
    ours_s, base_s = _median(ours, "wall"), _median(base, "wall")
    print(f"small report: {size_kb:.0f} kB; median of {runs} whole processes: "
          f"autopilot {ours_s:.3f} s, junitparser {base_s:.3f} s")  # fmt: skip
    return _figure(
        "parse_small_process_s", _median(ours, "wall"), _median(base, "wall"), 2.0,
        baseline_is="python -c junitparser 5.0.3 (stdlib ElementTree)",
    )  # fmt: skip


def main() -> None:
    """Measure both reports, print the table and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)  # interleaved rounds: a load burst hits one
    ap.add_argument("--small-runs", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = [*large(Path(tmp), args.cases, args.runs), small(Path(tmp), args.small_runs)]
    print(f"{'figure':<24}{'autopilot':>12}{'baseline':>12}{'ratio':>8}{'target':>8}  ok")
    for fig in figures:
        ok = "yes" if fig["ratio"] <= fig["target"] else "NO"
        print(
            f"{fig['name']:<24}{fig['value']:>12}{fig['baseline']:>12}"
            f"{fig['ratio']:>8}{'<=' + str(fig['target']):>8}  {ok}   ({fig['baseline_is']})"
        )
    print(json.dumps({"bench": "parse", "figures": figures}))


if __name__ == "__main__":
    main()
