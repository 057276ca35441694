"""One target's work: what its loop works with (:class:`Job`, chosen once by the file job) and
the runs beyond a round's draft: the round's run with coverage and, where the stack repeats in
one process, its flakiness repeats; the re-runs otherwise. The support files' proof is
:mod:`tasks.generate.support_gate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tasks.core.config import Settings
from tasks.core.types import ValidationResult
from tasks.generate.context import PromptContext
from tasks.generate.rounds import Conversation
from tasks.generate.skills import Skill
from tasks.generate.steps import Reruns, StepMemo
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.toolchains.base import CommandRunner, Toolchain


@dataclass(frozen=True)
class Job:
    """What one target's loop works with (chosen once by its job)."""

    project: Path
    target: Target
    chain: Toolchain
    runner: CommandRunner
    settings: Settings
    skill: Skill
    context: PromptContext
    #: The job's finished steps, replayed by a resumed job (:mod:`tasks.generate.steps`).
    steps: StepMemo = field(default_factory=lambda: StepMemo(None))


def run_round(job: Job, specs: list[str]) -> tuple[ValidationResult, list[ValidationResult] | None]:
    """The round's run with coverage and, when the stack repeats in one process (the framework
    starts once: a repeat costs only the tests' own time), the flakiness re-runs with it; that
    process gets the time the separate runs would have had together."""
    runs = job.settings.gates.flaky_runs
    if not job.chain.repeats_in_one_process or runs < 1:
        return job.chain.run_specs(job.project, specs, job.target.source, job.runner), None
    timeout_s = job.settings.sandbox.timeout_s * (1 + runs)
    results = job.chain.run_repeats(
        job.project,
        specs,
        job.target.source,
        job.runner,
        runs=1 + runs,
        coverage=True,
        timeout_s=timeout_s,
    )
    return results[0], results[1:]


def reruns(
    job: Job, talk: Conversation, outcome: FileOutcome, measured: list[ValidationResult] | None
) -> list[ValidationResult]:
    """The flakiness re-runs: those the last round's run made (`measured`), else run now (pass
    or fail is all they must show: no coverage measured); the first failing one ends them."""
    if measured is None:
        specs = sorted({*job.target.specs, *(p for p in talk.files if talk.rules.is_test_file(p))})
        inputs = {"files": talk.files, "specs": specs}
        done = job.steps.recall("reruns", inputs, Reruns)
        if done is None:
            talk.check_time()
            runs = job.settings.gates.flaky_runs
            done = Reruns(
                runs=job.chain.run_repeats(
                    job.project, specs, job.target.source, job.runner, runs=runs
                )
                if runs > 0
                else []
            )
            job.steps.keep("reruns", inputs, done)
        measured = done.runs
    kept = list(measured)
    outcome.reruns = kept
    return kept
