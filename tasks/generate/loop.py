"""Per-file generation: skill -> context -> generate -> lint -> run -> fix (bounded) -> gates.

:func:`generate_for_file` is a plain function over one target, working in the target's own copy
of the project (so a broken draft or factory of one file never disturbs another file's runs).
The only proof that a test is valid is running it: every draft is linted with autocorrect and run
with coverage in the sandbox; any failure (load error, failing examples, uncovered lines, lint
offences, forbidden static findings) goes back to the model verbatim, up to ``max_iterations``
rounds. Then the flakiness re-runs, a whole-suite run when a shared factory changed, and the LLM
judge (only for a spec that passed everything before it) feed :func:`tasks.generate.gates.evaluate`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from judge.llm import combined_score, judge_with_model
from judge.rubric import load_rubric
from judge.static import FORBIDDEN_RULES, check_spec
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.types import Finding, StaticVerdict, ValidationResult
from tasks.generate.context import PromptContext, build_context
from tasks.generate.files import (
    is_shared_support,
    is_test_file,
    read_back,
    reply_parser,
    snapshot,
    write_files,
)
from tasks.generate.gates import Evidence, GateDecision, evaluate, execution_gate
from tasks.generate.skills import Skill, choose_skill
from tasks.generate.targets import Target
from tasks.generate.types import Exchange, FileOutcome, JudgeRecord
from tasks.model.client import CallRecord, ModelClient
from tasks.model.messages import prepare_messages
from tasks.model.prompts import format_failure_output, render
from tasks.model.schemas import JudgeVerdict, schema_text
from tasks.toolchains.base import CommandRunner, Toolchain

log = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 4


def _static(files: dict[str, str], language: str) -> StaticVerdict | None:
    """The static rubric over every test file written: the weakest score, all findings."""
    verdicts = [
        check_spec(path, text, "ruby" if language == "ruby" else "python")
        for path, text in files.items()
        if is_test_file(path)
    ]
    if not verdicts:
        return None
    findings: list[Finding] = [f for v in verdicts for f in v.findings]
    return StaticVerdict(score=min(v.score for v in verdicts), findings=findings)


def _feedback(
    validation: ValidationResult, decision: GateDecision, static: StaticVerdict | None
) -> str:
    """The exact failure output for the fix prompt, plus forbidden static findings if any."""
    text = format_failure_output(validation)
    if decision.gate == "static" and static is not None:
        lines = [
            f"- {f.path}:{f.line} {f.rule}: {f.message}"
            for f in static.findings
            if f.rule in FORBIDDEN_RULES
        ]
        text += "\nStatic rubric: forbidden patterns (replace them with exact assertions):\n"
        text += "\n".join(lines)
    if decision.gate == "coverage" and not text.strip():
        text = "\n".join(decision.reasons)
    return text.strip() or "\n".join(decision.reasons)


class BudgetExhaustedError(AutopilotError):
    """The run's model-call budget is spent: the file stops cleanly where it is."""


class _Run:
    """State of one target's loop (kept small: the loop itself reads top to bottom)."""

    def __init__(
        self,
        target: Target,
        client: ModelClient,
        max_calls: int | None,
        time_limit_s: float | None = None,
    ) -> None:
        self.target = target
        self.client = client
        self.max_calls = max_calls
        self.time_limit_s = time_limit_s
        self.started = time.monotonic()
        self.records: list[CallRecord] = []
        self.exchanges: list[Exchange] = []
        self.files: dict[str, str] = {}

    def check_budget(self, needed: int = 1) -> None:
        """Raise BudgetExhaustedError when `needed` more calls would pass the run's budget, or
        the file's time limit is reached (checked between steps, never in the middle of one)."""
        if self.max_calls is not None and self.client.calls + needed > self.max_calls:
            raise BudgetExhaustedError(
                f"{self.target.source}: model call budget of {self.max_calls} calls exhausted"
            )
        self.check_time()

    def check_time(self) -> None:
        """Raise BudgetExhaustedError when the file's time limit is reached (the first round
        always runs: a file that was started gets at least one complete try)."""
        limit = self.time_limit_s
        if limit is None or not self.exchanges:
            return
        if time.monotonic() - self.started >= limit:
            raise BudgetExhaustedError(f"{self.target.source}: time limit of {limit:g} s reached")

    def ask(self, name: str, chosen: Skill, parse_project: Path, /, **variables: Any) -> None:
        self.check_budget()
        rendered = render(name, path=self.target.source, **variables)
        # Archived exactly as sent: redacted, with the file it is about named.
        messages = prepare_messages(rendered.messages(), self.target.source)
        exchange = Exchange(
            iteration=len(self.exchanges) + 1,
            prompt_name=rendered.meta.name,
            prompt_version=rendered.meta.version,
            prompt_sha256=rendered.meta.sha256,
            messages=messages,
        )
        self.exchanges.append(exchange)
        parser = reply_parser(
            parse_project, self.target, chosen, exchange.replies, written=self.files
        )
        try:
            files, record = self.client.complete_parsed(
                "generator", messages, parser, prompt=rendered.meta, about=self.target.source
            )
        except AutopilotError as exc:
            exchange.error = str(exc)
            self.records.extend(
                r for r in self.client.records[-1:] if r.about == self.target.source
            )
            raise
        self.records.append(record)
        exchange.tokens = record.input_tokens + record.output_tokens
        self.files.update(files)


def generate_for_file(
    project: Path,
    target: Target,
    *,
    toolchain: Toolchain,
    runner: CommandRunner,
    client: ModelClient,
    settings: Settings,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    context: PromptContext | None = None,
    skills: list[Skill] | None = None,
    baseline_failing: frozenset[str] = frozenset(),
    max_model_calls: int | None = None,
    time_limit_s: float | None = None,
) -> FileOutcome:
    """Write or improve the tests of one source file until they pass every gate, or give up.

    Args:
        project: the target's own copy of the project (written to; thrown away by the caller).
        target: the source file and its existing and new spec paths.
        toolchain: runs the tests with coverage and lints them.
        runner: the sandbox over `project`.
        client: the model client (generator and judge roles).
        settings: gates, judge samples, sandbox timeout.
        max_iterations: generate + fix rounds at most.
        context: the prompt context, when the caller built it already (for its cache key).
        skills: the skills to choose from (default: skills/).
        baseline_failing: example ids failing before the run, so a whole-suite check after a
            shared-factory change blames only new failures.
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
    )
    run = _Run(target, client, max_model_calls, time_limit_s)
    try:
        _generate(
            project,
            target,
            outcome,
            run,
            toolchain=toolchain,
            runner=runner,
            settings=settings,
            max_iterations=max(1, max_iterations),
            context=context,
            skills=skills,
            baseline_failing=baseline_failing,
        )
    except AutopilotError as exc:
        outcome.verdict, outcome.gate, outcome.reasons = "error", None, [str(exc)]
    except Exception as exc:  # one file's crash must not sink the run
        log.exception("%s: generation crashed", target.source)
        outcome.verdict, outcome.gate = "error", None
        outcome.reasons = [f"{target.source}: internal error: {type(exc).__name__}: {exc}"]
    outcome.exchanges = run.exchanges
    outcome.model_calls = len(run.records)
    outcome.tokens = sum(r.input_tokens + r.output_tokens for r in run.records)
    return outcome


def _generate(
    project: Path,
    target: Target,
    outcome: FileOutcome,
    run: _Run,
    *,
    toolchain: Toolchain,
    runner: CommandRunner,
    settings: Settings,
    max_iterations: int,
    context: PromptContext | None,
    skills: list[Skill] | None,
    baseline_failing: frozenset[str],
) -> None:
    skill = choose_skill(target.source, target.kind, skills=skills)
    outcome.skill = skill.name
    language = skill.language
    ctx = context or build_context(project, target, language)
    common = {
        **ctx.variables(),
        "kind": target.kind.value,
        "expected_spec": target.spec,
        "skill_name": skill.name,
        "skill": skill.body,
    }
    no_gain_flaky = settings.gates.model_copy(update={"flaky_runs": 0})
    originals: dict[str, str | None] = {}
    validation: ValidationResult | None = None
    static: StaticVerdict | None = None
    decision = GateDecision(accepted=False, gate="load", reasons=["no draft"])
    for iteration in range(1, max_iterations + 1):
        outcome.iterations = iteration
        if iteration == 1:
            run.ask("generate", skill, project, docs=ctx.docs, **common)
        else:
            assert validation is not None
            previous = [{"path": p, "text": t} for p, t in run.files.items()]
            run.ask(
                "fix",
                skill,
                project,
                previous_files=previous,
                failure_output=_feedback(validation, decision, static),
                iteration=iteration,
                **common,
            )
        new_paths = [p for p in run.files if p not in originals]
        originals.update(snapshot(project, new_paths))
        write_files(project, run.files)
        paths = list(run.files)
        offences = toolchain.lint(project, paths, True, runner)
        run.files = read_back(project, paths)  # what autocorrect made of them is what counts
        specs = sorted({*target.specs, *(p for p in run.files if is_test_file(p))})
        validation = toolchain.run_specs(project, specs, target.source, runner)
        validation.lint = offences
        static = _static(run.files, language)
        evidence = Evidence(
            validation=validation,
            lint=offences,
            coverage_before=target.coverage_before,
            static=static,
            forbidden_rules=FORBIDDEN_RULES,
        )
        # Everything but flakiness and the judge: those are only worth paying for at the end.
        decision = evaluate(evidence, no_gain_flaky, judge=False)
        log.info("%s: iteration %d: %s", target.source, iteration, decision.gate or "clean")
        if decision.accepted:
            break
    assert validation is not None
    changed = {p: t for p, t in run.files.items() if originals.get(p) != t}
    outcome.files = changed
    outcome.validation = validation
    outcome.coverage_after = round(validation.coverage.ratio, 4) if validation.coverage else None
    outcome.static_score = static.score if static is not None else None
    outcome.spec = target.spec if target.spec in run.files else _first_test(run.files, target)
    if not decision.accepted:
        _finish(outcome, decision)
        return
    reruns: list[ValidationResult] = []
    for _ in range(settings.gates.flaky_runs):
        run.check_time()
        # Pass or fail is all a re-run must show: no coverage measured (a process less each).
        again = toolchain.run_specs(project, specs, target.source, runner, coverage=False)
        reruns.append(again)
        if not execution_gate(again).accepted:
            break
    outcome.reruns = reruns
    evidence = Evidence(
        validation=validation,
        reruns=reruns,
        lint=validation.lint,
        coverage_before=target.coverage_before,
        static=static,
        forbidden_rules=FORBIDDEN_RULES,
    )
    decision = evaluate(evidence, settings.gates, judge=False)
    if decision.accepted:
        decision = _shared_files_check(
            project, changed, originals, toolchain, runner, baseline_failing
        )
    if not decision.accepted:
        _finish(outcome, decision)
        return
    spec_text = run.files[outcome.spec]
    run.check_budget(settings.model.judge_samples)
    verdict = judge_with_model(
        run.client,
        proof=validation,
        spec_path=outcome.spec,
        spec_text=spec_text,
        source_path=target.source,
        source_text=ctx.source,
        language="ruby" if language == "ruby" else "python",
        samples=settings.model.judge_samples,
        records=run.records,
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
    run.exchanges.append(_judge_exchange(len(run.exchanges) + 1, outcome, ctx, language, spec_text))
    run.exchanges[-1].tokens = verdict.tokens
    evidence.judge_score = combined_score(static, verdict, passed=True)
    outcome.judge_score = evidence.judge_score
    decision = evaluate(evidence, settings.gates)
    if not decision.accepted and verdict.missing:
        decision.reasons += [f"missing: {m}" for m in verdict.missing[:5]]
    _finish(outcome, decision)


def _judge_exchange(
    index: int, outcome: FileOutcome, ctx: PromptContext, language: str, spec_text: str
) -> Exchange:
    """The judge's request as it was sent (redacted), for the archive; its replies are kept parsed
    (the verdict: samples, reasons, missing), which is what the judge API returns."""
    rendered = render(
        "judge",
        path=outcome.spec,
        language=language,
        source_path=outcome.source,
        source=ctx.source,
        spec=spec_text,
        rubric=load_rubric().text,
        reply_schema=schema_text(JudgeVerdict),
    )
    judge = outcome.judge.model_dump_json() if outcome.judge is not None else ""
    return Exchange(
        iteration=index,
        prompt_name=rendered.meta.name,
        prompt_version=rendered.meta.version,
        prompt_sha256=rendered.meta.sha256,
        messages=prepare_messages(rendered.messages(), outcome.spec),
        replies=[judge],
    )


def _first_test(files: dict[str, str], target: Target) -> str:
    return next((p for p in files if is_test_file(p)), target.spec)


def _finish(outcome: FileOutcome, decision: GateDecision) -> None:
    outcome.verdict = "accepted" if decision.accepted else "rejected"
    outcome.gate = decision.gate
    outcome.reasons = list(decision.reasons)


def _shared_files_check(
    project: Path,
    changed: dict[str, str],
    originals: dict[str, str | None],
    toolchain: Toolchain,
    runner: CommandRunner,
    baseline_failing: frozenset[str],
) -> GateDecision:
    """A changed existing factory (or conftest/support file) is accepted only when the whole
    suite still passes with it: other specs depend on it."""
    touched = sorted(p for p in changed if originals.get(p) is not None and is_shared_support(p))
    if not touched:
        return GateDecision(accepted=True)
    suite = toolchain.run_suite(project, runner).validation
    names = ", ".join(touched)
    if not suite.loaded:
        return GateDecision.reject(
            "pass",
            [f"changed shared file(s) {names}: the suite no longer loads", suite.load_error or ""],
        )
    broken = [
        f"{e.id}: {_first_line(e.message) or e.status}"
        for e in suite.examples
        if e.status in ("failed", "error") and e.id not in baseline_failing
    ]
    if broken:
        return GateDecision.reject(
            "pass", [f"changed shared file(s) {names} break other specs", *broken]
        )
    return GateDecision(accepted=True)


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""
