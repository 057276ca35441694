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

Columns: the suite ran (ours); tests as ours / theirs (total: passed/failed/skipped); the
files whose line coverage both measured, and how many agree (to 0.01 %; files the framework's
run measured that are no sources, such as test files, are listed in ``unlisted.txt``); of the
sources whose function bodies the framework's run executed (a test ran them, or a module being
loaded did), how many the audit calls untested (a mapping or evidence miss); the modules of
declarations only (no function body: constants, enums, data tables, re-exports) the
framework's run loaded and the audit calls untested, for the record (loading runs them
whoever loads them); seconds.
Each project's documents (map, audit, the reference's figures, the files behind each column:
``differ``, ``unlisted``, ``misses``, ``declarations``, and ``imported``, the modules whose
functions no test called) are kept in WORK/out/NAME.
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

from field_reference import Reference, reference  # noqa: E402

from tasks.core.config import load_settings  # noqa: E402
from tasks.toolchains.registry import toolchain_class  # noqa: E402

AUTOPILOT = ROOT / ".venv" / "bin" / "autopilot"
#: The files behind the columns, one list each in WORK/out/NAME/<kind>.txt.
KINDS = ("differ", "unlisted", "misses", "declarations", "imported")
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
    differ: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    exercised: int = 0
    misses: list[str] = field(default_factory=list)
    declarations: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
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


def audit(repo: Path, home: Path, out: Path) -> tuple[dict, dict | None, str]:  # type: ignore[type-arg]
    """`autopilot map` and `autopilot -v audit` on `repo`, their documents kept in `out`."""
    env = {**os.environ, "AUTOPILOT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    docs = {}
    for command in ("map", "audit"):
        argv = [str(AUTOPILOT), "-v", command, "--repo", str(repo), "--json"]
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        (out / f"{command}.json").write_text(done.stdout)
        (out / f"{command}.stderr").write_text(done.stderr)
        docs[command] = done
    try:
        report = json.loads(docs["audit"].stdout)
    except ValueError:
        report = None
    return json.loads(docs["map"].stdout or "{}"), report, docs["audit"].stderr


def compare(row: Row, stack: str, repo: Path, report: dict, ref: Reference) -> None:  # type: ignore[type-arg]
    """Coverage per file, and the mapping of every source the framework's run exercised."""
    ours = {f["source"]: f for f in report["files"]}
    for path, ratio in sorted(ref.ratios.items()):
        if path not in ours:
            row.unlisted.append(path)
            continue
        row.compared += 1
        if abs(ours[path]["coverage"] - ratio) >= 1e-4:
            row.differ.append(f"{path}: ours {ours[path]['coverage']:.4f}, theirs {ratio:.4f}")
    chain = toolchain_class(stack).from_settings(load_settings(repo))
    for path, f in sorted(ours.items()):
        ran = ref.lines.get(path)
        if not ran:
            continue
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        body = chain.body_lines(path, text) or set()
        if ran & body:
            row.exercised += 1
            if f["status"] == "untested":
                row.misses.append(path)
        elif f["status"] == "untested":
            # Loaded, no function body run: a module of declarations only, or one whose
            # functions no test called (rightly untested; kept in imported.txt).
            (row.imported if body else row.declarations).append(path)


def check(name: str, source: str, work: Path) -> Row:
    row, start = Row(name), time.monotonic()
    out = work / "out" / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        repo = obtain(name, source, work)
        mapped, report, stderr = audit(repo, work / "home", out)
        row.stack = mapped.get("toolchain", "?")
        if report is None:
            row.ran, row.note = "no", (stderr.strip().splitlines() or ["no report"])[-1][:120]
            return row
        row.ran = "yes" if report["suite"]["ran"] else "no"
        t = report["summary"]["tests"]
        row.ours = (t["tests"], t["passed"], t["failed"] + t["errors"], t["skipped"])
        ref = reference(row.stack, repo, work / "home")
        row.theirs = ref.counts
        figures = {"counts": ref.counts, "ratios": ref.ratios}
        (out / "reference.json").write_text(json.dumps(figures, indent=1))
        compare(row, row.stack, repo, report, ref)
    except (RuntimeError, OSError, ValueError, KeyError, StopIteration) as exc:
        row.note = f"{type(exc).__name__}: {exc}"[:160]
    finally:
        row.seconds = time.monotonic() - start
        _keep(out, row)
    return row


def _keep(out: Path, row: Row) -> None:
    """The files behind the row's columns, one per line, in `out`."""
    for kind in KINDS:
        (out / f"{kind}.txt").write_text("".join(f"{p}\n" for p in getattr(row, kind)))


def _projects(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            rows.append((words[0], words[1]))
    return rows


def _cells(r: Row) -> list[str]:
    def fmt(c: tuple[int, int, int, int] | None) -> str:
        return "-" if c is None else f"{c[0]}: {c[1]}/{c[2]}/{c[3]}"

    same = "=" if r.ours is not None and r.ours == r.theirs else "≠"
    agree = r.compared - len(r.differ)
    coverage = f"{agree}/{r.compared}" if r.compared else "-"
    return [r.name, r.stack, r.ran, fmt(r.ours), fmt(r.theirs), same, coverage,
            f"{r.exercised}: {len(r.misses)}", str(len(r.declarations)), f"{r.seconds:.0f}",
            r.note]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", required=True, type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/autopilot-field"))
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    heads = ["project", "stack", "ran", "tests ours (p/f/s)", "theirs", "", "coverage agrees",
             "exercised: untested", "declarations only", "s", "note"]  # fmt: skip
    print("| " + " | ".join(heads) + " |\n|" + "---|" * len(heads), flush=True)
    for name, source in _projects(args.list):
        if args.only and name not in args.only:
            continue
        row = check(name, source, args.work)
        print("| " + " | ".join(_cells(row)) + " |", flush=True)
        for kind in KINDS[:4]:
            for item in getattr(row, kind)[:10]:
                print(f"    {name}: {kind}: {item}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
