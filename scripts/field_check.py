"""Field rehearsal over a list of real projects: `autopilot map` and `audit` on each, as a new
user would run them, against the framework's own run of the same tests (pytest with coverage.py,
Jest with its json-summary, RSpec with SimpleCov), one row per project.

Usage: ``scripts/field-check.sh --list FILE [--work DIR] [--only NAME]...``

FILE has one project a line, ``NAME SOURCE`` (``#`` starts a comment); SOURCE is one of
``pypi:NAME==VERSION`` (the sdist), ``npm:NAME@VERSION`` (the package tarball; a lock is made
for it, as a maintainer commits one), ``git:PATH[@COMMIT]`` (a local clone or mirror), or
``dir:PATH`` (a directory, relative to the repository). Each project becomes a fresh git
repository under WORK (default ``/tmp/autopilot-field``), with nothing installed: the audit
builds its prepared environment as it would in CI. The reference run uses that same
environment, in the same sandbox, with the framework's own commands and reports, so a
difference is one of counting or measuring, never of installing. Nothing of a project is kept
in this repository.

Columns: the suite ran (ours); tests as ours / theirs (total, passed, failed, skipped); the
files whose line coverage the two measured, and how many agree (to 0.01 %); sources the
framework covered that the audit calls untested (a mapping or evidence miss); seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.audit.prepared import prepared_run  # noqa: E402
from tasks.core.config import SandboxSettings, load_settings  # noqa: E402
from tasks.core.run_context import job_context  # noqa: E402
from tasks.sandbox.make import make_runner  # noqa: E402

AUTOPILOT = ROOT / ".venv" / "bin" / "autopilot"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "field",
    "GIT_AUTHOR_EMAIL": "field@example.invalid",
    "GIT_COMMITTER_NAME": "field",
    "GIT_COMMITTER_EMAIL": "field@example.invalid",
}


@dataclass
class Row:
    """One project's figures."""

    name: str
    stack: str = "?"
    ran: str = "?"
    ours: tuple[int, int, int, int] | None = None
    theirs: tuple[int, int, int, int] | None = None
    compared: int = 0
    agree: int = 0
    misses: list[str] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}: {(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout


def obtain(name: str, source: str, work: Path) -> Path:
    """The project as a fresh git repository under `work`."""
    dest = work / "src" / name
    if dest.exists():
        shutil.rmtree(dest)
    kind, _, spec = source.partition(":")
    scratch = work / "dl" / name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if kind == "pypi":
        base = getattr(sys, "_base_executable", None) or "python3"
        _run([base, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
              "-d", str(scratch), spec], cwd=scratch)  # fmt: skip
        _unpack(next(scratch.iterdir()), dest)
    elif kind == "npm":
        _run(["npm", "pack", "--silent", spec], cwd=scratch)
        _unpack(next(scratch.glob("*.tgz")), dest)
        _run(["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit",
              "--no-fund"], cwd=dest)  # fmt: skip
    elif kind == "git":
        path, _, commit = spec.partition("@")
        _run(["git", "clone", "-q", path, str(dest)], cwd=work)
        if commit:
            _run(["git", "checkout", "-q", commit], cwd=dest)
        shutil.rmtree(dest / ".git")
    elif kind == "dir":
        shutil.copytree(ROOT / spec, dest, ignore=shutil.ignore_patterns(".git", "node_modules"))
    else:
        raise RuntimeError(f"{source}: unknown source kind {kind!r}")
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", name]):
        _run(["git", *argv], cwd=dest, env=GIT_ENV)
    return dest


def _unpack(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(dest.parent / ".unpack", filter="data")
    (top,) = list((dest.parent / ".unpack").iterdir())
    top.rename(dest)
    (dest.parent / ".unpack").rmdir()


def audit(repo: Path, home: Path) -> tuple[dict, dict | None, str]:  # type: ignore[type-arg]
    env = {**os.environ, "AUTOPILOT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    mapped = subprocess.run([str(AUTOPILOT), "map", "--repo", str(repo), "--json"], env=env,
                            capture_output=True, text=True)  # fmt: skip
    done = subprocess.run([str(AUTOPILOT), "-v", "audit", "--repo", str(repo), "--json"],
                          env=env, capture_output=True, text=True)  # fmt: skip
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    return json.loads(mapped.stdout or "{}"), report, done.stderr


def reference(stack: str, repo: Path, home: Path) -> tuple:  # type: ignore[type-arg]
    """(counts, {source: coverage ratio}) of the framework's own run, in the sandbox, inside
    the same prepared run as the audit's (its environment, reused; its services, started)."""
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
            return _rspec(runner, copy, env_dir)
    raise RuntimeError(f"no reference run for {stack}")


def _pytest(runner, copy: Path, home: Path, env_dir: Path | None) -> tuple:  # type: ignore[no-untyped-def,type-arg]
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
    parsed = json.loads(_run([str(AUTOPILOT), "parse", f"{copy}/ref-junit.xml", "--json"], copy))
    t = parsed["summary"]
    counts = (t["tests"], t["passed"], t["failed"] + t["errors"], t["skipped"])
    report = copy / "ref-cov.json"
    cov = json.loads(report.read_text()) if report.is_file() else {}
    ratios = {}
    for path, data in cov.get("files", {}).items():
        s = data["summary"]
        if s["num_statements"]:
            ratios[os.path.relpath(os.path.join(copy, path), copy)] = (
                s["covered_lines"] / s["num_statements"]
            )
    return counts, ratios


def _jest(runner, copy: Path, env_dir: Path | None) -> tuple:  # type: ignore[no-untyped-def,type-arg]
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
                "--coverageReporters=json-summary", f"--coverageDirectory={copy}/ref-cov",
                *extra], cwd=copy, env={"NODE_OPTIONS": options})  # fmt: skip
    doc = json.loads((copy / "ref.json").read_text())
    skipped = doc.get("numPendingTests", 0) + doc.get("numTodoTests", 0)
    counts = (doc["numTotalTests"], doc["numPassedTests"], doc["numFailedTests"], skipped)
    summary = copy / "ref-cov" / "coverage-summary.json"
    data = json.loads(summary.read_text()) if summary.is_file() else {}
    ratios = {
        os.path.relpath(path, copy): v["lines"]["covered"] / v["lines"]["total"]
        for path, v in data.items()
        if path != "total" and v["lines"]["total"]
    }
    return counts, ratios


_SIMPLECOV = """require "simplecov"
SimpleCov.start { coverage_dir "%s"; add_filter "/spec/" }
"""


def _rspec(runner, copy: Path, env_dir: Path | None) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    (copy / "ref_simplecov.rb").write_text(_SIMPLECOV % f"{copy}/ref-cov")
    env = {"RAILS_ENV": "test"}  # the prepared bundle's variables come with the run's context
    runner.run(["rspec", "-r", f"{copy}/ref_simplecov.rb", "--format", "json", "--out",
                f"{copy}/ref.json"], cwd=copy, env=env)  # fmt: skip
    doc = json.loads((copy / "ref.json").read_text())
    s = doc["summary"]
    counts = (s["example_count"], s["example_count"] - s["failure_count"] - s["pending_count"],
              s["failure_count"], s["pending_count"])  # fmt: skip
    resultset = copy / "ref-cov" / ".resultset.json"
    data = json.loads(resultset.read_text()) if resultset.is_file() else {}
    ratios = {}
    for run in data.values():
        for path, lines in run["coverage"].items():
            lines = lines["lines"] if isinstance(lines, dict) else lines
            relevant = [n for n in lines if n is not None]
            if relevant:
                ratios[os.path.relpath(path, copy)] = sum(1 for n in relevant if n) / len(relevant)
    return counts, ratios


def check(name: str, source: str, work: Path) -> Row:
    row, start = Row(name), time.monotonic()
    try:
        repo = obtain(name, source, work)
        mapped, report, stderr = audit(repo, work / "home")
        row.stack = mapped.get("toolchain", "?")
        if report is None:
            row.ran, row.note = "no", (stderr.strip().splitlines() or ["no report"])[-1][:120]
            return row
        row.ran = "yes" if report["suite"]["ran"] else "no"
        t = report["summary"]["tests"]
        row.ours = (t["tests"], t["passed"], t["failed"] + t["errors"], t["skipped"])
        counts, ratios = reference(row.stack, repo, work / "home")
        row.theirs = counts
        ours = {f["source"]: f for f in report["files"]}
        for path, ratio in ratios.items():
            if path in ours:
                row.compared += 1
                row.agree += abs(ours[path]["coverage"] - ratio) < 1e-4
                if ratio > 0 and ours[path]["status"] == "untested":
                    row.misses.append(path)
    except (RuntimeError, OSError, ValueError, KeyError, StopIteration) as exc:
        row.note = f"{type(exc).__name__}: {exc}"[:160]
    finally:
        row.seconds = time.monotonic() - start
    return row


def _projects(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            rows.append((words[0], words[1]))
    return rows


def _cells(r: Row) -> list[str]:
    def fmt(c: tuple[int, int, int, int] | None) -> str:
        return "-" if c is None else f"{c[0]} ({c[1]}/{c[2]}/{c[3]})"

    same = "=" if r.ours is not None and r.ours == r.theirs else "≠"
    coverage = f"{r.agree}/{r.compared}" if r.compared else "-"
    return [r.name, r.stack, r.ran, fmt(r.ours), fmt(r.theirs), same, coverage,
            str(len(r.misses)), f"{r.seconds:.0f}", r.note]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", required=True, type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/autopilot-field"))
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    heads = ["project", "stack", "ran", "tests ours (p/f/s)", "theirs", "", "coverage agrees",
             "covered but untested", "s", "note"]  # fmt: skip
    print("| " + " | ".join(heads) + " |\n|" + "---|" * len(heads), flush=True)
    for name, source in _projects(args.list):
        if args.only and name not in args.only:
            continue
        row = check(name, source, args.work)
        print("| " + " | ".join(_cells(row)) + " |", flush=True)
        for miss in row.misses[:10]:
            print(f"    covered but untested: {miss}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
