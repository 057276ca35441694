"""The whole-branch proof (the ``suite`` gate): before the nightly commits, the accepted files
run together with the existing suite.

Every accepted outcome's files are written into the run's worktree (at the base commit), then
the suite runs :data:`SUITE_RUNS` times, without coverage: the test files listed explicitly,
the new ones first, every second run in the reverse order. Where the stack repeats in one
process and the baseline had no failing example, :meth:`Toolchain.run_repeats` with
``reverse_alternate`` runs them (pytest: one process, the second session's tests reversed;
RSpec: the files reversed); otherwise one process per run with the files listed reversed (Jest
schedules them itself). An example that fails together but did not fail in the baseline is a
new failure:

- in a new test file: the file's outcome is rejected at the ``suite`` gate with the failing
  examples as reasons;
- elsewhere (an existing test broke, or the run did not get to its tests): each remaining
  accepted outcome is left out in turn, and the first whose absence makes the run clean is
  rejected; when none does, every remaining one is rejected (nothing unproven is committed).

After a rejection its files are taken out of the worktree again and the rest re-run, until a
run is clean or nothing is left. The proof's figure (runs, seconds) goes in the report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tasks.core.types import TestCaseResult, ValidationResult
from tasks.generate.gates import GateResult
from tasks.generate.report import SuiteProof, merge_accepted
from tasks.generate.types import FileOutcome
from tasks.toolchains.base import CommandRunner, Toolchain

log = logging.getLogger(__name__)

#: Runs of the suite together per round (the issue: at least twice, the order varied).
SUITE_RUNS = 2
#: Failing examples named in one rejection.
MAX_NAMED = 5


@dataclass
class _Tree:
    """The worktree the proof writes into, and how to take a file back out."""

    project: Path
    originals: dict[str, bytes | None] = field(default_factory=dict)

    def write(self, out: FileOutcome) -> None:
        for rel, text in out.files.items():
            path = self.project / rel
            if rel not in self.originals:
                self.originals[rel] = path.read_bytes() if path.is_file() else None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def remove(self, out: FileOutcome, kept: Iterable[FileOutcome] = ()) -> None:
        still = {rel for o in kept if o is not out for rel in o.files}
        for rel in out.files:
            if rel in still:
                continue
            path, old = self.project / rel, self.originals.get(rel)
            if old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(old)


def _key(case: TestCaseResult) -> tuple[str, str]:
    return (case.file or "", case.name) if case.file else (case.id, case.name)


def new_failures(
    result: ValidationResult, baseline: Iterable[TestCaseResult]
) -> list[TestCaseResult]:
    """The examples failing in `result` that did not fail in the baseline run."""
    before = {_key(c) for c in baseline if c.status in ("failed", "error")}
    before_ids = {c.id for c in baseline if c.status in ("failed", "error")}
    return [
        e
        for e in result.examples
        if e.status in ("failed", "error") and e.id not in before_ids and _key(e) not in before
    ]


@dataclass
class _Run:
    """How the suite runs together (the worktree's toolchain, sandbox and baseline)."""

    tree: _Tree
    chain: Toolchain
    runner: CommandRunner
    existing: list[str]
    baseline: list[TestCaseResult]
    timeout_s: float | None
    proof: SuiteProof

    def once(self, specs: list[str]) -> tuple[ValidationResult, list[TestCaseResult]]:
        start = time.monotonic()
        result = self.chain.run_specs(
            self.tree.project, specs, None, self.runner, timeout_s=self.timeout_s, coverage=False
        )
        self.proof.runs += 1
        self.proof.seconds += time.monotonic() - start
        return result, new_failures(result, self.baseline)

    def round(self, kept: list[FileOutcome]) -> tuple[ValidationResult, list[TestCaseResult]]:
        """SUITE_RUNS runs of the suite with `kept` written in, the new files first and every
        second run reversed (in one process where the stack repeats in one); the first bad
        run's result."""
        rules = self.chain.file_rules(self.tree.project)
        new = [p for o in kept for p in o.files if rules.is_test_file(p)]
        specs = list(dict.fromkeys(new + self.existing))
        if not self.chain.repeats_in_one_process or any(
            c.status in ("failed", "error") for c in self.baseline
        ):
            # Repeats end at the first run that fails, and a failure the baseline already had
            # must not end the proof: one process per run, each checked against the baseline.
            result: ValidationResult | None = None
            for i in range(SUITE_RUNS):
                result, failures = self.once(list(reversed(specs)) if i % 2 else specs)
                if failures or not _ran(result):
                    return result, failures
            assert result is not None
            return result, []
        timeout = self.timeout_s * SUITE_RUNS if self.timeout_s else None
        start = time.monotonic()
        results = self.chain.run_repeats(
            self.tree.project,
            specs,
            None,
            self.runner,
            runs=SUITE_RUNS,
            timeout_s=timeout,
            reverse_alternate=True,
        )
        self.proof.seconds += time.monotonic() - start
        for result in results:  # they stop at a failing run
            self.proof.runs += 1
            failures = new_failures(result, self.baseline)
            if failures or not _ran(result):
                return result, failures
        return results[-1], []


def _ran(result: ValidationResult) -> bool:
    return result.loaded and result.reason is None


def _why(result: ValidationResult, failures: list[TestCaseResult]) -> str:
    if not _ran(result):
        cause = result.load_error or result.reason or "the suite did not run"
        return f"the suite did not run together with it: {cause.strip().splitlines()[0][:300]}"
    named = ", ".join(e.id for e in failures[:MAX_NAMED])
    more = f" and {len(failures) - MAX_NAMED} more" if len(failures) > MAX_NAMED else ""
    return f"passes alone but fails together with the suite: {named}{more}"


def _owners(
    kept: list[FileOutcome],
    result: ValidationResult,
    failures: list[TestCaseResult],
    chain: Toolchain,
) -> list[FileOutcome]:
    """The kept outcomes whose own files failed (or, for a run that did not load, were named
    as not loading)."""
    bad = {e.file for e in failures if e.file}
    if not _ran(result) and result.load_error:
        bad |= set(chain.load_error_files(result.load_error))
    return [o for o in kept if bad & set(o.files)]


def _reject(out: FileOutcome, reason: str, proof: SuiteProof) -> None:
    out.verdict, out.gate, out.reasons = "rejected", "suite", [reason]
    out.gates.append(GateResult(gate="suite", passed=False, reasons=[reason]))
    proof.dropped[out.source] = reason
    log.warning("suite gate: %s rejected: %s", out.source, reason)


def prove_together(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    outcomes: list[FileOutcome],
    baseline: ValidationResult,
    *,
    timeout_s: float | None = None,
) -> SuiteProof:
    """Run the accepted outcomes' files together with the suite in `project` (the run's
    worktree at the base commit); reject at the ``suite`` gate what fails only together.

    Outcomes are changed in place. `baseline` is the suite's run before any change.
    """
    proof = SuiteProof()
    merge_accepted(outcomes)  # two files written with other content: the later one errs
    kept = [o for o in outcomes if o.verdict == "accepted" and o.files]
    proof_order = list(kept)
    if not kept:
        return proof
    tree = _Tree(project)
    existing = list(dict.fromkeys(e.file for e in baseline.examples if e.file))
    run = _Run(tree, chain, runner, existing, baseline.examples, timeout_s, proof)
    for out in kept:
        tree.write(out)
    while kept:
        result, failures = run.round(kept)
        if not failures and _ran(result):
            break
        why = _why(result, failures)
        culprits = _owners(kept, result, failures, chain) or _isolate(run, kept)
        for out in culprits or list(kept):
            _reject(out, why, proof)
            kept.remove(out)
            tree.remove(out, kept)
    for out in kept:
        out.gates.append(GateResult(gate="suite", passed=True))
    proof.proved = [o.source for o in kept]
    for out in proof_order:
        tree.remove(out)
    return proof


def _isolate(run: _Run, kept: list[FileOutcome]) -> list[FileOutcome]:
    """The first kept outcome whose absence makes one whole-suite run clean ([]: none)."""
    if len(kept) < 2:
        return list(kept)
    for out in kept:
        run.tree.remove(out, kept)
        result, failures = run.once([])
        run.tree.write(out)
        if not failures and _ran(result):
            return [out]
    return []
