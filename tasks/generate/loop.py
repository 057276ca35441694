"""Per-file generation: generate -> lint -> run -> fix (bounded) -> the gates.

:func:`generate_for_file` is a plain function over one target, working in the target's own copy
of the project (so a broken draft or factory of one file never disturbs another file's runs),
with the skill, the prompt context and the toolchain its job chose once. The only proof that a
test is valid is running it: every draft is linted with autocorrect and run with coverage in the
sandbox; any failure (load error, failing examples, uncovered lines, lint offences, forbidden
static findings) goes back to the model verbatim, up to ``max_iterations`` rounds. Then the
flakiness re-runs, a whole-suite run when a shared support file changed, and the LLM judge (only
for a spec that passed everything before it) complete the evidence the gates
(:func:`tasks.generate.gates.evaluate`) decide on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from judge.llm import LLMVerdict, combined_score, judge_with_model
from judge.static import FORBIDDEN_RULES, check_spec
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.types import Finding, StaticVerdict, ValidationResult
from tasks.generate.context import PromptContext
from tasks.generate.files import read_back, snapshot, write_files
from tasks.generate.gates import Evidence, GateDecision, GateName, evaluate
from tasks.generate.rounds import BudgetExhaustedError, Conversation
from tasks.generate.skills import Skill
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome, JudgeRecord
from tasks.model.client import ModelClient
from tasks.model.feedback import format_failure_output
from tasks.toolchains.base import CommandRunner, Toolchain

__all__ = ["DEFAULT_MAX_ITERATIONS", "BudgetExhaustedError", "generate_for_file"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 4
#: What a round cannot measure yet (the re-runs and the judge are only worth paying for at the
#: end), and what is measured last.
_ROUND: tuple[GateName, ...] = ("flaky", "judge")
_NOT_YET_JUDGED: tuple[GateName, ...] = ("judge",)


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
    baseline_failing: frozenset[str] = frozenset()


def generate_for_file(
    project: Path,
    target: Target,
    *,
    chain: Toolchain,
    runner: CommandRunner,
    client: ModelClient,
    settings: Settings,
    skill: Skill,
    context: PromptContext,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    baseline_failing: frozenset[str] = frozenset(),
    max_model_calls: int | None = None,
    time_limit_s: float | None = None,
) -> FileOutcome:
    """Write or improve the tests of one source file until they pass every gate, or give up.

    Args:
        project: the target's own copy of the project (written to; thrown away by the caller).
        target: the source file and its existing and new spec paths.
        chain: the project's toolchain (runs the tests with coverage, lints, parses them).
        runner: the sandbox over `project`.
        client: the model client (generator and judge roles).
        settings: gates, judge samples, sandbox timeout.
        skill: the one skill of the target's kind.
        context: the target's prompt context (part of its job's cache key).
        max_iterations: generate + fix rounds at most.
        baseline_failing: example ids failing before the run, so a whole-suite check after a
            shared-support change blames only new failures.
        max_model_calls: the run's budget, counted on `client` (shared by every file); when a
            call would pass it, the file ends as an error saying so.
        time_limit_s: the file's wall-clock budget, checked before each model call, test run
            round and the flakiness re-runs; a running command is bounded by the sandbox's own
            timeout instead.

    Returns:
        The outcome; model, sandbox and tool failures become ``verdict="error"`` with a reason,
        never an exception, so one file never sinks the others.
    """
    outcome = FileOutcome(
        source=target.source,
        kind=target.kind,
        spec=target.spec,
        verdict="error",
        coverage_before=target.coverage_before,
        skill=skill.name,
    )
    rules = chain.file_rules(project)
    talk = Conversation(
        target, client, skill, rules, max_calls=max_model_calls, time_limit_s=time_limit_s
    )
    job = Job(
        project=project,
        target=target,
        chain=chain,
        runner=runner,
        settings=settings,
        skill=skill,
        context=context,
        baseline_failing=baseline_failing,
    )
    try:
        _generate(job, outcome, talk, max(1, max_iterations))
    except AutopilotError as exc:
        outcome.verdict, outcome.gate, outcome.reasons = "error", None, [str(exc)]
    except Exception as exc:  # one file's crash must not sink the run
        log.exception("%s: generation crashed", target.source)
        outcome.verdict, outcome.gate = "error", None
        outcome.reasons = [f"{target.source}: internal error: {type(exc).__name__}: {exc}"]
    outcome.exchanges = talk.exchanges
    outcome.model_calls = len(talk.records)
    outcome.tokens = sum(r.input_tokens + r.output_tokens for r in talk.records)
    return outcome


def _generate(job: Job, outcome: FileOutcome, talk: Conversation, max_iterations: int) -> None:
    """The rounds, then the evidence that is only worth paying for at the end, gate by gate."""
    evidence, decision, originals = _rounds(job, outcome, talk, max_iterations)
    changed = {p: t for p, t in talk.files.items() if originals.get(p) != t}
    _record_draft(outcome, job.target, evidence, talk, changed)
    if decision.accepted:
        evidence.reruns = _reruns(job, talk, outcome, evidence.reruns)
        decision = evaluate(evidence, job.settings.gates, skip=_NOT_YET_JUDGED)
    if decision.accepted:
        evidence.shared_breaks = _shared_breaks(job, changed, originals)
        decision = evaluate(evidence, job.settings.gates, skip=_NOT_YET_JUDGED)
    if decision.accepted:
        verdict = _judge(job, outcome, talk, evidence.validation)
        evidence.judge_score = combined_score(evidence.static, verdict, passed=True)
        outcome.judge_score = evidence.judge_score
        decision = evaluate(evidence, job.settings.gates)
        if not decision.accepted and verdict.missing:
            decision.results[-1].reasons += [f"missing: {m}" for m in verdict.missing[:5]]
    _finish(outcome, decision)


def _rounds(
    job: Job, outcome: FileOutcome, talk: Conversation, max_iterations: int
) -> tuple[Evidence, GateDecision, dict[str, str | None]]:
    """Generate, then fix with the exact failure output, until the gates that a round can
    measure pass (everything but the re-runs and the judge) or the rounds run out."""
    ctx, target = job.context, job.target
    common = {
        **ctx.variables(),
        "kind": target.kind,
        "expected_spec": target.spec,
        "skill_name": job.skill.name,
        "skill": job.skill.body,
    }
    originals: dict[str, str | None] = {}
    evidence: Evidence | None = None
    decision = GateDecision.reject("load", ["no draft"])
    for iteration in range(1, max_iterations + 1):
        outcome.iterations = iteration
        if evidence is None:
            talk.ask("generate", job.project, docs=ctx.docs, **common)
        else:
            previous = [{"path": p, "text": t} for p, t in talk.files.items()]
            talk.ask(
                "fix",
                job.project,
                previous_files=previous,
                failure_output=_feedback(evidence, decision),
                iteration=iteration,
                **common,
            )
        originals.update(snapshot(job.project, [p for p in talk.files if p not in originals]))
        evidence = _measure(job, talk)
        decision = evaluate(evidence, job.settings.gates, skip=_ROUND)
        log.info("%s: iteration %d: %s", target.source, iteration, decision.gate or "clean")
        if decision.accepted:
            break
    assert evidence is not None
    return evidence, decision, originals


def _measure(job: Job, talk: Conversation) -> Evidence:
    """Write the draft, lint it with autocorrect, run its tests with coverage, and check it
    with the static rubric: what the autocorrected files are is what counts."""
    write_files(job.project, talk.files)
    paths = list(talk.files)
    offences = job.chain.lint(job.project, paths, True, job.runner)
    talk.files = read_back(job.project, paths)
    specs = sorted({*job.target.specs, *(p for p in talk.files if talk.rules.is_test_file(p))})
    validation, reruns = _run(job, specs)
    validation.lint = offences
    return Evidence(
        validation=validation,
        reruns=reruns,
        lint=offences,
        coverage_before=job.target.coverage_before,
        static=_static(talk.files, job.chain, talk),
        forbidden_rules=FORBIDDEN_RULES,
    )


def _run(job: Job, specs: list[str]) -> tuple[ValidationResult, list[ValidationResult] | None]:
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


def _static(files: dict[str, str], chain: Toolchain, talk: Conversation) -> StaticVerdict | None:
    """The static rubric over every test file written: the weakest score, all findings."""
    verdicts = [
        check_spec(path, text, chain)
        for path, text in files.items()
        if talk.rules.is_test_file(path)
    ]
    if not verdicts:
        return None
    findings: list[Finding] = [f for v in verdicts for f in v.findings]
    return StaticVerdict(score=min(v.score for v in verdicts), findings=findings)


def _feedback(evidence: Evidence, decision: GateDecision) -> str:
    """The exact failure output for the fix prompt, plus forbidden static findings if any."""
    text = format_failure_output(evidence.validation)
    if decision.gate == "static" and evidence.static is not None:
        lines = [
            f"- {f.path}:{f.line} {f.rule}: {f.message}"
            for f in evidence.static.findings
            if f.rule in FORBIDDEN_RULES
        ]
        text += "\nStatic rubric: forbidden patterns (replace them with exact assertions):\n"
        text += "\n".join(lines)
    if decision.gate == "coverage" and not text.strip():
        text = "\n".join(decision.reasons)
    return text.strip() or "\n".join(decision.reasons)


def _record_draft(
    outcome: FileOutcome,
    target: Target,
    evidence: Evidence,
    talk: Conversation,
    changed: dict[str, str],
) -> None:
    """What the last round produced, on the outcome (whatever the gates say)."""
    validation = evidence.validation
    outcome.files = changed
    outcome.validation = validation
    outcome.coverage_after = round(validation.coverage.ratio, 4) if validation.coverage else None
    outcome.static_score = evidence.static.score if evidence.static is not None else None
    if target.spec not in talk.files:
        outcome.spec = next((p for p in talk.files if talk.rules.is_test_file(p)), target.spec)


def _reruns(
    job: Job, talk: Conversation, outcome: FileOutcome, measured: list[ValidationResult] | None
) -> list[ValidationResult]:
    """The flakiness re-runs: those the last round's run made (`measured`), else run now (pass
    or fail is all they must show: no coverage measured); the first failing one ends them."""
    if measured is None:
        specs = sorted({*job.target.specs, *(p for p in talk.files if talk.rules.is_test_file(p))})
        talk.check_time()
        runs = job.settings.gates.flaky_runs
        measured = (
            job.chain.run_repeats(job.project, specs, job.target.source, job.runner, runs=runs)
            if runs > 0
            else []
        )
    reruns = list(measured)
    outcome.reruns = reruns
    return reruns


def _shared_breaks(
    job: Job, changed: dict[str, str], originals: dict[str, str | None]
) -> list[str]:
    """What a changed existing shared support file (a factory, conftest.py) breaks: other tests
    depend on it, so the whole suite must still pass with it ([] when none changed)."""
    rules = job.chain.file_rules(job.project)
    touched = sorted(
        p for p in changed if originals.get(p) is not None and rules.is_support_file(p)
    )
    if not touched:
        return []
    suite = job.chain.run_suite(job.project, job.runner).validation
    names = ", ".join(touched)
    if not suite.loaded:
        return [
            f"changed shared file(s) {names}: the suite no longer loads",
            suite.load_error or "",
        ]
    broken = [
        f"{e.id}: {_first_line(e.message) or e.status}"
        for e in suite.examples
        if e.status in ("failed", "error") and e.id not in job.baseline_failing
    ]
    return [f"changed shared file(s) {names} break other specs", *broken] if broken else []


def _judge(
    job: Job, outcome: FileOutcome, talk: Conversation, proof: ValidationResult
) -> LLMVerdict:
    """The LLM judge's samples on the spec that passed everything else; its prompt is archived
    as it was sent, its verdict as the judge API returns it."""
    spec_text = talk.files[outcome.spec]
    talk.check_budget(job.settings.model.judge_samples)
    verdict = judge_with_model(
        talk.client,
        proof=proof,
        spec_path=outcome.spec,
        spec_text=spec_text,
        source_path=job.target.source,
        source_text=job.context.source,
        language=job.chain.language,
        samples=job.settings.model.judge_samples,
        records=talk.records,
    )
    outcome.judge = JudgeRecord(
        spec=outcome.spec,
        score=verdict.score,
        samples=verdict.samples,
        reasons=verdict.reasons,
        missing=verdict.missing,
        prompt_version=verdict.prompt_version,
        rubric_version=verdict.rubric_version,
    )
    if verdict.prompt is not None:
        exchange = talk.record_exchange(
            verdict.prompt, verdict.messages, [outcome.judge.model_dump_json()]
        )
        exchange.tokens = verdict.tokens
    return verdict


def _finish(outcome: FileOutcome, decision: GateDecision) -> None:
    outcome.verdict = "accepted" if decision.accepted else "rejected"
    outcome.gate = decision.gate
    outcome.reasons = list(decision.reasons)
    outcome.gates = list(decision.results)


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""
