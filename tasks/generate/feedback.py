"""What goes back to the generator after a gate said no: the exact text of a fix prompt.

Four loops feed the generator: a round's failure (the tools' exact output, and the static
findings the `static` gate rejects, each with its line), the support gate (what the support
files written beside the tests changed in other results), the judge (its median under
`min_judge`: its reasons and missing cases, and the static findings that lowered the score), and
the mutation score (each surviving mutant as the assertion the tests lack). The static gate's
rule list is :func:`static_reject`: ``gates.static_reject``, else the rubric's own list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from judge.llm import LLMVerdict
from judge.rubric import load_rubric
from tasks.core.config import GateSettings
from tasks.core.types import Finding, StaticVerdict
from tasks.generate.gates import Evidence, GateDecision
from tasks.model.feedback import format_failure_output

#: Findings shown at most per section (a vague file can have hundreds).
MAX_FINDINGS = 30


def static_reject(settings: GateSettings) -> frozenset[str]:
    """The static rule ids the `static` gate rejects: the setting, else judge/rubric.md's
    "Static gate" list."""
    if settings.static_reject is not None:
        return frozenset(settings.static_reject)
    return frozenset(load_rubric().static_gate)


def _finding_lines(findings: Sequence[Finding]) -> list[str]:
    return [f"- {f.path}:{f.line} {f.rule}: {f.message}" for f in findings[:MAX_FINDINGS]]


def round_feedback(evidence: Evidence, decision: GateDecision) -> str:
    """A round's failure for the fix prompt: the exact failure output, plus every static finding
    the `static` gate rejected (vague matchers included) with its line."""
    text = format_failure_output(evidence.validation)
    if decision.gate == "static" and evidence.static is not None:
        rejected = [f for f in evidence.static.findings if f.rule in evidence.forbidden_rules]
        text += (
            "\nStatic rubric: rejected patterns (replace each with an exact assertion on the "
            "value or state it should prove; take out every hook or setting that changes how "
            "results are reported or which tests run):\n"
        )
        text += "\n".join(_finding_lines(rejected))
    if decision.gate == "coverage":
        # The threshold that was missed (and branches); the lines are in the tools' output.
        head = [r for r in decision.reasons if not r.startswith("uncovered lines:")]
        text = "\n".join([*head, text])
    if decision.gate == "diff_coverage":  # the changed lines no test ran, named
        text = "\n".join([*decision.reasons, text])
    return text.strip() or "\n".join(decision.reasons)


def support_feedback(reasons: Sequence[str]) -> str:
    """The support gate's rejection for another round: support files run with every test of
    the project, so they may change no result but the new tests'."""
    return "\n".join(
        [
            "The tests pass, but the support files written beside them were rejected: they are "
            "loaded with every test of the project and may change no result but the new "
            "tests'. Keep the tests; build the data they need in the test file itself, or "
            "write support files that only add fixtures or factories:",
            *(f"- {r}" for r in reasons),
        ]
    )


def judge_feedback(
    score: float,
    verdict: LLMVerdict,
    static: StaticVerdict | None,
    settings: GateSettings,
    rejected_rules: Collection[str],
) -> str:
    """The judge's verdict for another round: score, reasons, missing cases, and the static
    findings that lowered the score (those the gate rejects never reach the judge)."""
    out = [
        f"The tests pass, but the reviewer scored them {score:.2f} on the test-quality rubric; "
        f"at least {settings.min_judge:.2f} is required. Keep every correct test and fix what "
        "the reviewer found:",
        "Reasons:",
        *(f"- {r}" for r in verdict.reasons or ["(none given)"]),
    ]
    if verdict.missing:
        out += ["Missing (add a test with an exact assertion for each):"]
        out += [f"- {m}" for m in verdict.missing]
    lowering = [f for f in (static.findings if static else []) if f.rule not in rejected_rules]
    if lowering:
        out += ["Static rubric findings that lower the score:", *_finding_lines(lowering)]
    return "\n".join(out)
