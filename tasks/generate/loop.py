"""Per-file generation: generate -> lint -> run -> fix (bounded) -> the gates.

:func:`generate_for_file` is a plain function over one target, working in the target's own copy
of the project (so a broken draft or factory of one file never disturbs another file's runs),
with the skill, the prompt context and the toolchain its job chose once. The only proof that a
test is valid is running it: every draft is linted with autocorrect and run with coverage in the
sandbox; any failure (load error, failing examples, uncovered lines, lint offences, forbidden
static findings, those of the support files written beside the tests included) goes back to
the model verbatim, up to ``max_iterations`` rounds. Then the flakiness re-runs, the proof of
the support files the reply wrote or changed (:mod:`tasks.generate.support_gate`: left out when
the tests pass without them, else they must change no other result), and the LLM judge (only
for a spec that passed everything before it) complete the evidence the gates
(:func:`tasks.generate.gates.evaluate`) decide on.
"""

from __future__ import annotations

import logging
from pathlib import Path

from judge.llm import LLMVerdict, combined_score, judge_with_model
from judge.static import check_reply
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.types import StaticVerdict, ValidationResult
from tasks.generate.context import PromptContext
from tasks.generate.feedback import (
    judge_feedback,
    round_feedback,
    static_reject,
    support_feedback,
)
from tasks.generate.files import read_back, snapshot, write_files
from tasks.generate.gates import Evidence, GateDecision, GateName, diff_share, evaluate
from tasks.generate.mutation import mutation_score, survivors_feedback
from tasks.generate.numbered import line_ranges, numbered, numbered_for
from tasks.generate.rounds import BudgetExhaustedError, Conversation, round_record
from tasks.generate.skills import Skill
from tasks.generate.steps import MeasuredRound, StepMemo
from tasks.generate.support_gate import SupportCheck, check_support
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome, JudgeRecord
from tasks.generate.work import Job, reruns, run_round
from tasks.model.client import ModelClient
from tasks.toolchains.base import CommandRunner, Toolchain

__all__ = ["DEFAULT_MAX_ITERATIONS", "BudgetExhaustedError", "generate_for_file"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 4
#: What a round cannot measure yet (the re-runs and the judge are only worth paying for at the
#: end), and what is measured last.
_ROUND: tuple[GateName, ...] = ("flaky", "support", "judge", "mutation")
_NOT_YET_PROVED: tuple[GateName, ...] = ("support", "judge", "mutation")
_NOT_YET_JUDGED: tuple[GateName, ...] = ("judge", "mutation")
_NOT_YET_MUTATED: tuple[GateName, ...] = ("mutation",)


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
    max_model_calls: int | None = None,
    time_limit_s: float | None = None,
    steps: StepMemo | None = None,
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
        max_model_calls: the run's budget, counted on `client` (shared by every file); when a
            call would pass it, the file ends as an error saying so.
        time_limit_s: the file's wall-clock budget, checked before each model call, test run
            round and the flakiness re-runs; a running command is bounded by the sandbox's own
            timeout instead.
        steps: where the job's finished steps are kept and replayed from (a resumed job);
            None keeps nothing.

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
        changed_lines=list(target.changed_lines),
        diff_coverage_before=target.diff_coverage_before,
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
        steps=steps or StepMemo(None),
    )
    try:
        _generate(job, outcome, talk, max(1, max_iterations))
    except AutopilotError as exc:
        outcome.verdict, outcome.gate, outcome.reasons = "error", None, [str(exc)]
    except Exception as exc:  # one file's crash must not sink the run
        if type(exc).__name__ == "TaskRunTimeoutError":
            raise  # the orchestrator stopped this file at its time limit: it reports it
        log.exception("%s: generation crashed", target.source)
        outcome.verdict, outcome.gate = "error", None
        outcome.reasons = [f"{target.source}: internal error: {type(exc).__name__}: {exc}"]
    outcome.exchanges = talk.exchanges
    outcome.model_calls = len(talk.records)
    outcome.tokens = sum(r.input_tokens + r.output_tokens for r in talk.records)
    return outcome


def _generate(job: Job, outcome: FileOutcome, talk: Conversation, max_iterations: int) -> None:
    """The rounds, then the evidence only worth paying for at the end, gate by gate; a judge
    score under `min_judge` sends its reasons back for another round while rounds remain."""
    originals: dict[str, str | None] = {}
    previous: tuple[Evidence, str] | None = None
    while True:
        evidence, decision = _rounds(job, outcome, talk, max_iterations, originals, previous)
        changed = {p: t for p, t in talk.files.items() if originals.get(p) != t}
        _record_draft(outcome, job.target, evidence, talk, changed)
        decision, verdict = _final_gates(job, outcome, talk, evidence, decision, changed, originals)
        text = _another_round(job, outcome, evidence, decision, verdict)
        if text is None or outcome.iterations >= max_iterations:
            break
        previous = (evidence, text)
        log.info("%s: %s gate failed: another round", job.target.source, decision.gate)
    _finish(outcome, decision)


def _final_gates(
    job: Job,
    outcome: FileOutcome,
    talk: Conversation,
    evidence: Evidence,
    decision: GateDecision,
    changed: dict[str, str],
    originals: dict[str, str | None],
) -> tuple[GateDecision, LLMVerdict | None]:
    """The re-runs, the support files' proof and the judge, each only when all before passed."""
    if decision.accepted:
        evidence.reruns = reruns(job, talk, outcome, evidence.reruns)
        decision = evaluate(evidence, job.settings.gates, skip=_NOT_YET_PROVED)
    if decision.accepted:
        _take_support(outcome, evidence, check_support(job, talk, changed, originals), changed)
        decision = evaluate(evidence, job.settings.gates, skip=_NOT_YET_JUDGED)
    if not decision.accepted:
        return decision, None
    verdict = _judge(job, outcome, talk, evidence.validation)
    evidence.judge_score = combined_score(evidence.static, verdict, passed=True)
    outcome.judge_score = evidence.judge_score
    outcome.judge_scores.append(evidence.judge_score)
    decision = evaluate(evidence, job.settings.gates, skip=_NOT_YET_MUTATED)
    if not decision.accepted:
        if verdict.missing:
            decision.results[-1].reasons += [f"missing: {m}" for m in verdict.missing[:5]]
        return decision, verdict
    _score_mutants(job, outcome, talk, evidence)
    return evaluate(evidence, job.settings.gates), verdict


def _take_support(
    outcome: FileOutcome, evidence: Evidence, check: SupportCheck, changed: dict[str, str]
) -> None:
    """The support gate's evidence; support files the tests do not need leave the outcome,
    and the run without them becomes the evidence the gates decide on."""
    evidence.support_breaks, evidence.support_notes = check.breaks, check.notes
    if not check.left_out or check.validation is None:
        return
    outcome.files = {p: t for p, t in changed.items() if p not in check.left_out}
    evidence.validation, evidence.reruns = check.validation, check.reruns
    outcome.validation, outcome.reruns = check.validation, check.reruns
    coverage = check.validation.coverage
    outcome.coverage_after = round(coverage.ratio, 4) if coverage else None
    outcome.diff_coverage_after = diff_share(coverage, outcome.changed_lines)


def _another_round(
    job: Job,
    outcome: FileOutcome,
    evidence: Evidence,
    decision: GateDecision,
    verdict: LLMVerdict | None,
) -> str | None:
    """What the judge, the support gate or the mutants found, for another round (None: no such
    gate failed)."""
    gates = job.settings.gates
    if decision.gate == "support":
        return support_feedback(decision.reasons)
    if decision.gate == "judge" and verdict is not None:
        score = evidence.judge_score or 0.0
        return judge_feedback(score, verdict, evidence.static, gates, evidence.forbidden_rules)
    if decision.gate == "mutation" and outcome.mutation is not None:
        return survivors_feedback(outcome.mutation, job.target.source, gates.min_mutation or 0.0)
    return None


def _score_mutants(job: Job, outcome: FileOutcome, talk: Conversation, evidence: Evidence) -> None:
    """The mutation score of a file that passed every other gate (skipped without coverage or
    with ``max_mutants`` 0): only its new test files run, in the sandbox."""
    gates, coverage = job.settings.gates, evidence.validation.coverage
    if gates.max_mutants <= 0 or coverage is None:
        return
    tests = {p: t for p, t in talk.files.items() if talk.rules.is_test_file(p)}
    record = mutation_score(
        job.project,
        job.target.source,
        coverage,
        tests,
        chain=job.chain,
        runner=job.runner,
        limit=gates.max_mutants,
        cache_dir=job.settings.cache_root / "mutants",
        only=job.target.changed_lines or None,
        timeout_s=job.settings.sandbox.spec_timeout_s,
    )
    outcome.mutation, outcome.mutation_score = record, record.score
    evidence.mutation_score, evidence.mutants = record.score, (record.killed, record.made)


def _rounds(
    job: Job,
    outcome: FileOutcome,
    talk: Conversation,
    max_iterations: int,
    originals: dict[str, str | None],
    previous: tuple[Evidence, str] | None = None,
) -> tuple[Evidence, GateDecision]:
    """Generate (or fix with `previous`: the last evidence and a later gate's feedback), then
    fix with the exact failure output, until the gates a round can measure pass (everything but
    the re-runs and the judge) or the rounds run out. The source is shown numbered, with the
    lines and branches no test ran marked in place."""
    ctx, target = job.context, job.target
    common = {
        **ctx.variables(),
        "kind": target.kind,
        "expected_spec": target.spec,
        "skill_name": job.skill.name,
        "skill": job.skill.body,
        "changed_lines": line_ranges(target.changed_lines),
    }
    evidence, pending = previous if previous is not None else (None, None)
    decision = GateDecision.reject("load", ["no draft"])
    for iteration in range(outcome.iterations + 1, max_iterations + 1):
        outcome.iterations = iteration
        if evidence is None:
            source = numbered(ctx.source, target.uncovered_lines, (), target.changed_lines)
            talk.ask("generate", job.project, docs=ctx.docs, **(common | {"source": source}))
        else:
            previous_files = [{"path": p, "text": t} for p, t in talk.files.items()]
            failure = pending if pending is not None else round_feedback(evidence, decision)
            pending = None
            talk.ask(
                "fix",
                job.project,
                previous_files=previous_files,
                failure_output=failure,
                iteration=iteration,
                **(common | {"source": _numbered_now(ctx.source, evidence, target)}),
            )
        originals.update(snapshot(job.project, [p for p in talk.files if p not in originals]))
        evidence = _measure(job, talk)
        decision = evaluate(evidence, job.settings.gates, skip=_ROUND)
        outcome.rounds.append(round_record(iteration, evidence.validation, decision.gate))
        log.info("%s: iteration %d: %s", target.source, iteration, decision.gate or "clean")
        if decision.accepted:
            break
    assert evidence is not None
    return evidence, decision


def _numbered_now(text: str, evidence: Evidence, target: Target) -> str:
    return numbered_for(text, evidence.validation.coverage, target.changed_lines)


def _measure(job: Job, talk: Conversation) -> Evidence:
    """Write the draft, lint it with autocorrect, run its tests with coverage, and check it
    with the static rubric: what the autocorrected files are is what counts. A round a killed
    job had measured is replayed from its kept steps (the copy gets the linted files)."""
    inputs = {"files": talk.files, "specs": sorted(job.target.specs)}
    kept = job.steps.recall("round", inputs, MeasuredRound)
    if kept is None:
        write_files(job.project, talk.files)
        paths = list(talk.files)
        offences = job.chain.lint(job.project, paths, True, job.runner)
        linted = read_back(job.project, paths)
        specs = sorted({*job.target.specs, *(p for p in linted if talk.rules.is_test_file(p))})
        validation, reruns = run_round(job, specs)
        kept = MeasuredRound(files=linted, offences=offences, validation=validation, reruns=reruns)
        job.steps.keep("round", inputs, kept)
    else:
        write_files(job.project, kept.files)
    talk.files = dict(kept.files)
    validation, reruns, offences = kept.validation, kept.reruns, kept.offences
    validation.lint = offences
    return Evidence(
        validation=validation,
        reruns=reruns,
        lint=offences,
        coverage_before=job.target.coverage_before,
        had_specs=bool(job.target.specs),
        no_cover=sorted(job.chain.no_cover_lines(job.context.source)),
        changed_lines=list(job.target.changed_lines),
        static=_static(talk.files, job.chain, talk),
        forbidden_rules=static_reject(job.settings.gates),
    )


def _static(files: dict[str, str], chain: Toolchain, talk: Conversation) -> StaticVerdict | None:
    """The static rubric over every file written: the test files (the weakest score, all
    findings) and the support files beside them (what they change about results)."""
    tests = {p: t for p, t in files.items() if talk.rules.is_test_file(p)}
    support = {p: t for p, t in files.items() if p not in tests}
    return check_reply(tests, support, chain)


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
    outcome.diff_coverage_after = diff_share(validation.coverage, target.changed_lines)
    outcome.static_score = evidence.static.score if evidence.static is not None else None
    if target.spec not in talk.files:
        outcome.spec = next((p for p in talk.files if talk.rules.is_test_file(p)), target.spec)


def _judge(
    job: Job, outcome: FileOutcome, talk: Conversation, proof: ValidationResult
) -> LLMVerdict:
    """The LLM judge's samples on the spec that passed everything else; its prompt is archived
    as it was sent, its verdict as the judge API returns it."""
    spec_text = talk.files[outcome.spec]
    # What the branch would get beside the spec: the support files it keeps (tests aside).
    support = {p: t for p, t in outcome.files.items() if not talk.rules.is_test_file(p)}
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
        support_files=support,
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
