"""The framework's own run of a field project (scripts/field_check.py): pytest with coverage.py,
Jest with its json-summary (and istanbul's JSON for the lines), RSpec with SimpleCov, each in
the sandbox, inside the same prepared run as the audit's (its environment reused, its services
started), with the framework's own commands and reports and no option of Autopilot's.

:func:`reference` returns the counts (total, passed, failed, skipped) and, per source, the
framework's line coverage and the lines it ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.audit.prepared import prepared_run  # noqa: E402
from tasks.core.config import SandboxSettings, load_settings  # noqa: E402
from tasks.core.run_context import job_context  # noqa: E402
from tasks.sandbox.make import make_runner  # noqa: E402

AUTOPILOT = ROOT / ".venv" / "bin" / "autopilot"
Counts = tuple[int, int, int, int]


@dataclass
class Reference:
    """The framework's figures: counts, and per source its coverage ratio and lines run."""

    counts: Counts
    ratios: dict[str, float] = field(default_factory=dict)
    lines: dict[str, set[int]] = field(default_factory=dict)


def reference(stack: str, repo: Path, home: Path) -> Reference:
    """The framework's own run of `repo` (a copy of it, so the audit's tree stays clean)."""
    copy = repo.parent.parent / "ref" / repo.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    os.environ["AUTOPILOT_HOME"] = str(home)
    settings = load_settings(copy)
    with prepared_run(settings, copy, copy, stack) as ready, job_context("reference"):
        if ready.problem:
            raise RuntimeError(f"reference run not ready: {ready.problem}")
        env_dir = Path(ready.env.path) if ready.env is not None else None
        runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=1800), copy)
        if stack == "python-pytest":
            return _pytest(runner, copy, home, env_dir)
        if stack == "node-jest":
            return _jest(runner, copy, env_dir)
        if stack == "ruby-rspec":
            return _rspec(runner, copy)
    raise RuntimeError(f"no reference run for {stack}")


def _pytest(runner, copy: Path, home: Path, env_dir: Path | None) -> Reference:  # type: ignore[no-untyped-def]
    if env_dir is not None:
        python = str(env_dir / "venv" / "bin" / "python")
    else:
        isolated = sorted((home / "envs").glob("pytest-coverage-*"))
        python = str(isolated[-1] / "bin" / "python") if isolated else sys.executable
        runner.toolchain_dirs.append(str(Path(python).parents[1]))
    env = {"PYTHONPATH": f"{copy}/src:{copy}", "PYTHONDONTWRITEBYTECODE": "1"}
    runner.run([python, "-m", "coverage", "run", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                f"--junitxml={copy}/ref-junit.xml"], cwd=copy, env=env)  # fmt: skip
    runner.run([python, "-m", "coverage", "json", "-q", "-o", f"{copy}/ref-cov.json"],
               cwd=copy, env=env)  # fmt: skip
    parsed = subprocess.run([str(AUTOPILOT), "parse", f"{copy}/ref-junit.xml", "--json"],
                            cwd=copy, capture_output=True, text=True)  # fmt: skip
    if parsed.returncode != 0:
        raise RuntimeError(f"pytest's report: {parsed.stderr.strip()[-300:]}")
    t = json.loads(parsed.stdout)["summary"]
    out = Reference((t["tests"], t["passed"], t["failed"] + t["errors"], t["skipped"]))
    report = copy / "ref-cov.json"
    cov = json.loads(report.read_text()) if report.is_file() else {}
    for path, data in cov.get("files", {}).items():
        s = data["summary"]
        rel = os.path.relpath(os.path.join(copy, path), copy)
        if s["num_statements"]:
            out.ratios[rel] = s["covered_lines"] / s["num_statements"]
        out.lines[rel] = set(data.get("executed_lines", []))
    return out


def _jest(runner, copy: Path, env_dir: Path | None) -> Reference:  # type: ignore[no-untyped-def]
    modules = env_dir / "node_modules" if env_dir is not None else copy / "node_modules"
    extra: list[str] = []
    if not modules.exists():  # nothing installed: Autopilot's own tools, as the audit used
        modules = ROOT / "toolchains" / "node" / "node_modules"
        runner.toolchain_dirs.append(str(modules))
        own = any(copy.glob("jest.config.*")) or "jest" in json.loads(
            (copy / "package.json").read_text()
        )
        extra = [] if own else ["--preset", "ts-jest"]
    if not (copy / "node_modules").exists():
        (copy / "node_modules").symlink_to(modules)
    jest = str(modules / "jest" / "bin" / "jest.js")
    scripts = " ".join(
        p.read_text() for p in (copy / "package.json", copy / "Makefile") if p.is_file()
    )
    options = "--experimental-vm-modules" if "experimental-vm-modules" in scripts else ""
    runner.run(["node", jest, "--ci", "--json", f"--outputFile={copy}/ref.json", "--coverage",
                "--coverageReporters=json-summary", "--coverageReporters=json",
                f"--coverageDirectory={copy}/ref-cov", *extra],
               cwd=copy, env={"NODE_OPTIONS": options})  # fmt: skip
    doc = json.loads((copy / "ref.json").read_text())
    skipped = doc.get("numPendingTests", 0) + doc.get("numTodoTests", 0)
    out = Reference((doc["numTotalTests"], doc["numPassedTests"], doc["numFailedTests"], skipped))
    summary = copy / "ref-cov" / "coverage-summary.json"
    data = json.loads(summary.read_text()) if summary.is_file() else {}
    for path, v in data.items():
        if path != "total" and v["lines"]["total"]:
            out.ratios[os.path.relpath(path, copy)] = v["lines"]["covered"] / v["lines"]["total"]
    final = copy / "ref-cov" / "coverage-final.json"
    for path, entry in (json.loads(final.read_text()) if final.is_file() else {}).items():
        where = entry["statementMap"]
        ran = {where[k]["start"]["line"] for k, hits in entry["s"].items() if hits}
        out.lines[os.path.relpath(path, copy)] = ran
    return out


_SIMPLECOV = """require "simplecov"
SimpleCov.start { coverage_dir "%s"; add_filter "/spec/" }
"""


def _rspec(runner, copy: Path) -> Reference:  # type: ignore[no-untyped-def]
    (copy / "ref_simplecov.rb").write_text(_SIMPLECOV % f"{copy}/ref-cov")
    env = {"RAILS_ENV": "test"}  # the prepared bundle's variables come with the run's context
    runner.run(["rspec", "-r", f"{copy}/ref_simplecov.rb", "--format", "json", "--out",
                f"{copy}/ref.json"], cwd=copy, env=env)  # fmt: skip
    doc = json.loads((copy / "ref.json").read_text())
    s = doc["summary"]
    out = Reference((s["example_count"], s["example_count"] - s["failure_count"] -
                     s["pending_count"], s["failure_count"], s["pending_count"]))  # fmt: skip
    resultset = copy / "ref-cov" / ".resultset.json"
    data = json.loads(resultset.read_text()) if resultset.is_file() else {}
    for run in data.values():
        for path, lines in run["coverage"].items():
            lines = lines["lines"] if isinstance(lines, dict) else lines
            relevant = [n for n in lines if n is not None]
            rel = os.path.relpath(path, copy)
            if relevant:
                out.ratios[rel] = sum(1 for n in relevant if n) / len(relevant)
            out.lines[rel] = {i + 1 for i, n in enumerate(lines) if n}
    return out
