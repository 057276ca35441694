"""The ``support`` gate: what a reply writes beyond its test files (a conftest, a factory, a
file under the support directories, a setup file) is proved by running, before the judge.

A support file is loaded with every test of the project, so a hook in it can make the reply's
own wrong tests pass, or every test of the branch pass. The proof, in the target's copy:

1. The reply's tests run again (with coverage, and their flakiness re-runs) with the project's
   ORIGINAL support files. When they pass, they do not need the new or changed support files:
   those are left out of the outcome (never committed), and this run is the evidence the other
   gates decide on.
2. Otherwise the support files are needed, and must change no result but the new tests':
   - a canary: each reply test file with one more test that must fail (its name holds a random
     token the model cannot know) runs with the support files; a canary reported as anything
     but a failure means the support files change how results are reported;
   - the project's existing tests (the reply's test files as they were before it) run with the
     original support files and with the new ones; any test whose outcome differs (failing ->
     passing, passing -> failing, skipped, or no longer or newly collected) rejects the file,
     named. A difference must show again in a second pair of runs to count (a flaky test is
     not the support file's doing).

The copy is left as the outcome will be committed: with the support files when they are kept,
with the originals when they are left out.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.types import TestCaseResult, ValidationResult
from tasks.generate.files import write_files
from tasks.generate.rounds import Conversation
from tasks.generate.work import Job, run_round

log = logging.getLogger(__name__)

#: Tests named in one rejection.
MAX_NAMED = 5


class SupportCheck(BaseModel):
    """What the ``support`` gate found about the support files one reply wrote or changed."""

    files: list[str] = Field(default_factory=list, description="Support files written/changed")
    left_out: list[str] = Field(
        default_factory=list, description="Support files the tests do not need: not committed"
    )
    breaks: list[str] = Field(default_factory=list, description="Why the gate fails ([]: not)")
    notes: list[str] = Field(default_factory=list, description="What a passing gate decided")
    validation: ValidationResult | None = Field(
        None, description="When left out: the tests' run with the project's own support files"
    )
    reruns: list[ValidationResult] = Field(default_factory=list)


def _restore(project: Path, paths: list[str], originals: dict[str, str | None]) -> None:
    """Put `paths` back as they were before the reply (absent when they were new)."""
    for rel in paths:
        old = originals.get(rel)
        if old is None:
            (project / rel).unlink(missing_ok=True)
        else:
            (project / rel).write_text(old, encoding="utf-8")


def _names(paths: list[str]) -> str:
    return ", ".join(paths)


def check_support(
    job: Job, talk: Conversation, changed: dict[str, str], originals: dict[str, str | None]
) -> SupportCheck:
    """The ``support`` gate's evidence for the files a reply wrote or changed (`changed`,
    against `originals`); nothing to prove when they are all test files."""
    support = sorted(p for p in changed if not talk.rules.is_test_file(p))
    if not support:
        return SupportCheck()
    tests = {p: t for p, t in talk.files.items() if talk.rules.is_test_file(p)}
    talk.check_time()
    _restore(job.project, support, originals)
    alone, reruns = _alone(job, sorted({*job.target.specs, *tests}))
    if alone.passed and all(r.passed for r in reruns):
        note = f"{_names(support)}: left out, the tests pass with the project's own support files"
        log.info("%s: %s", job.target.source, note)
        return SupportCheck(
            files=support, left_out=support, notes=[note], validation=alone, reruns=reruns
        )
    write_files(job.project, {p: talk.files[p] for p in support})
    talk.check_time()
    breaks = _canary(job, tests, support)
    if not breaks:
        talk.check_time()
        breaks = _existing(job, tests, support, originals)
    if breaks:
        breaks.append(f"the tests need {_names(support)}: without it, {_failing(alone)}")
        log.warning("%s: support gate: %s", job.target.source, breaks[0])
    return SupportCheck(files=support, breaks=breaks)


def _alone(job: Job, specs: list[str]) -> tuple[ValidationResult, list[ValidationResult]]:
    """The tests' run with coverage and their flakiness re-runs (as a round measures them)."""
    validation, reruns = run_round(job, specs)
    runs = job.settings.gates.flaky_runs
    if reruns is None:
        reruns = []
        if validation.passed and runs > 0:
            reruns = job.chain.run_repeats(
                job.project, specs, job.target.source, job.runner, runs=runs
            )
    return validation, list(reruns)


def _failing(result: ValidationResult) -> str:
    if not result.loaded or result.reason:
        cause = (result.load_error or result.reason or "they do not load").strip()
        return f"they do not run: {cause.splitlines()[0][:200] if cause else 'no output'}"
    bad = [e.id for e in result.examples if e.status in ("failed", "error")]
    if not bad:
        return "no test passes"
    more = f" and {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else ""
    return f"{', '.join(bad[:MAX_NAMED])}{more} fail"


def _canary(job: Job, tests: dict[str, str], support: list[str]) -> list[str]:
    """Each test file with a test that must fail, run with the support files: a canary that
    is not reported as failing means they change how results are reported."""
    token = secrets.token_hex(6)
    canaries = {
        path: text
        for path, original in tests.items()
        if (text := job.chain.canary_test(job.project, path, original, token)) is not None
    }
    if not canaries:
        return []
    write_files(job.project, canaries)
    try:
        result = job.chain.run_specs(
            job.project, sorted(canaries), None, job.runner, coverage=False
        )
    finally:
        write_files(job.project, {p: tests[p] for p in canaries})
    out: list[str] = []
    for path in sorted(canaries):
        case = next(
            (
                e
                for e in result.examples
                if (token in e.id or token in e.name) and e.file in (None, path)
            ),
            None,
        )
        if case is not None and case.status in ("failed", "error"):
            continue
        seen = f"reported as {case.status}" if case is not None else "not reported at all"
        out.append(
            f"{_names(support)} changes how results are reported: a test that must fail "
            f"(written beside {path}) was {seen}"
        )
    return out


def _existing(
    job: Job, tests: dict[str, str], support: list[str], originals: dict[str, str | None]
) -> list[str]:
    """The project's existing tests with the original support files and with the new ones:
    every test whose outcome differs, confirmed by a second pair of runs."""
    _restore(job.project, list(tests), originals)
    try:
        changes = _changes(job, support, originals)
        if changes:
            again = _changes(job, support, originals)
            changes = {k: v for k, v in changes.items() if k in again}
    finally:
        write_files(job.project, tests)
    if not changes:
        return []
    if "" in changes:
        return [f"{_names(support)}: {changes['']}"]
    named = list(changes.values())
    more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
    return [
        f"{_names(support)} changes the outcome of {len(named)} existing test(s): "
        f"{', '.join(named[:MAX_NAMED])}{more}"
    ]


def _changes(job: Job, support: list[str], originals: dict[str, str | None]) -> dict[str, str]:
    """One run of the existing tests without the support files and one with them, compared."""
    kept = {p: (job.project / p).read_text(encoding="utf-8") for p in support}
    _restore(job.project, support, originals)
    try:
        before = _suite(job)
    finally:
        write_files(job.project, kept)
    return _diff(before, _suite(job))


def _suite(job: Job) -> ValidationResult:
    return job.chain.run_specs(job.project, [], None, job.runner, coverage=False)


def _ran(result: ValidationResult) -> bool:
    return result.loaded and result.reason is None


def _kind(status: str) -> str:
    return "failing" if status in ("failed", "error") else status


def _diff(before: ValidationResult, after: ValidationResult) -> dict[str, str]:
    """Test id -> ``id (before -> after)`` for every test whose outcome differs; key ``""``
    when the existing tests no longer run at all with the support files."""
    if not _ran(before):
        log.warning("support gate: the existing tests do not run in the copy; not compared")
        return {}
    if not _ran(after):
        cause = (after.load_error or after.reason or "no output").strip().splitlines()
        return {"": f"the existing tests no longer run with it: {cause[0][:300] if cause else ''}"}
    was = {e.id: e for e in before.examples}
    now = {e.id: e for e in after.examples}
    out: dict[str, str] = {}
    for key in dict.fromkeys([*was, *now]):
        old, new = was.get(key), now.get(key)
        if old is not None and new is not None and _kind(old.status) == _kind(new.status):
            continue
        out[key] = f"{key} ({_status(old)} -> {_status(new)})"
    return out


def _status(case: TestCaseResult | None) -> str:
    return case.status if case is not None else "not collected"
