"""The static rubric: deterministic checks of a test file against judge/rubric.md.

The rules, their weights and the scoring are here; each toolchain parses its own test files
(:meth:`~tasks.toolchains.base.Toolchain.rubric_findings`: RSpec with tree-sitter, pytest with
`ast`) and the support files a reply writes beside them
(:meth:`~tasks.toolchains.base.Toolchain.support_findings`: the `result-hook` and
`hidden-tests` rules, :func:`check_support`); no rule looks at raw text. :func:`check_reply`
is the verdict on one reply: its test files' weakest score, capped like a test file's when a
support file breaks a forbidden rule.

Scoring (deterministic, documented so a score can be explained):
    score = max(0, 1 - sum(weight of each finding) / number of examples)
    then capped at FORBIDDEN_CAP when any forbidden rule fired, and rounded to 3 decimals.
A file that does not parse, or that has no example at all, scores 0.0. A finding that leaves its
example proving nothing precise (vague matcher, type-only, bare assert, over-mocking) weighs a
whole example; smells (error without message, sleep, @ivars) weigh a quarter. Normalising by the
number of examples means one vague matcher in a twenty-example spec costs 0.05, while the same
matcher in every example drives the score to 0. The weights were chosen so that the static score
orders the labelled calibration cases (judge/calibration/) like their rubric labels.

Forbidden rules cap the score: the spec is structurally broken in a way the rubric scores 0.0
(private methods, no assertion, "does not crash" tests, stubbing every instance) or cannot even
load. The nightly's `static` gate rejects the rules listed in judge/rubric.md's "Static gate"
section (the forbidden ones and `vague-matcher`), or the `gates.static_reject` setting
(`tasks.generate.feedback.static_reject`); `gate_passes` is the forbidden rules alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import BadInputError
from tasks.core.types import Finding, StaticVerdict
from tasks.toolchains.base import Toolchain

logger = logging.getLogger(__name__)

#: Score ceiling of a file with any forbidden finding (rubric: "most tests lack meaning").
FORBIDDEN_CAP = 0.2
#: Files larger than this are not parsed: test files are never this big, hostile input may be.
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class Rule:
    """One static rule: its id, whether it fails the gate, and its score weight (a toolchain's
    parser reports the rules its framework can break)."""

    id: str
    forbidden: bool
    weight: float
    description: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("syntax", True, 1.0, "the file does not parse, so it cannot load"),
        Rule("no-examples", True, 1.0, "the file defines no example or test"),
        Rule("no-assertion", True, 1.0, "an example or test with no expectation/assert"),
        Rule("private-call", True, 1.0, "calls or reads a private method or attribute"),
        Rule(
            "not-raise-error",
            True,
            1.0,
            "`not_to raise_error`: a 'does not crash' test",
        ),
        Rule(
            "any-instance-mock",
            True,
            1.0,
            "allow_any_instance_of / expect_any_instance_of",
        ),
        Rule(
            "result-hook",
            True,
            1.0,
            "a hook, formatter, reporter or replaced global that changes how results are reported",
        ),
        Rule(
            "hidden-tests",
            True,
            1.0,
            "a collection hook, filter or wholesale skip that changes which tests run",
        ),
        Rule(
            "vague-matcher",
            False,
            1.0,
            "be_truthy, be_falsey, be_present, be_blank, be_between, include(:key)",
        ),
        Rule("type-only", False, 1.0, "a type check (be_a / isinstance) is the only check"),
        Rule("bare-assert", False, 1.0, "`assert x` with no comparison"),
        Rule(
            "not-none-only",
            False,
            1.0,
            "`assert x is not None` is a test's only check",
        ),
        Rule("over-mocking", False, 1.0, "more than 3 stubs, doubles or patches in one test"),
        Rule("raises-without-match", False, 0.25, "error path checked without its message"),
        Rule("sleep", False, 0.25, "sleep in a test"),
        Rule("instance-variable", False, 0.25, "@ivar set in a spec instead of let"),
    )
}

FORBIDDEN_RULES: frozenset[str] = frozenset(r.id for r in RULES.values() if r.forbidden)


def score(findings: list[Finding], examples: int) -> float:
    """The static score of a file from its findings and example count (see module docstring).

    Args:
        findings: Findings of one file; unknown rule ids weigh 1.0 so they are never free.
        examples: Number of examples/tests in the file.

    Returns:
        A score in 0..1.
    """
    rules = {f.rule for f in findings}
    if examples <= 0 or "syntax" in rules:
        return 0.0
    penalty = sum(RULES[f.rule].weight if f.rule in RULES else 1.0 for f in findings)
    value = max(0.0, 1.0 - penalty / examples)
    if rules & FORBIDDEN_RULES:
        value = min(value, FORBIDDEN_CAP)
    return round(value, 3)


def check_spec(path: str, text: str, chain: Toolchain) -> StaticVerdict:
    """Run the static rubric over one test file's text.

    Args:
        path: The repository-relative path, reported in every finding.
        text: The file's content.
        chain: The toolchain whose test file it is (it parses the file).

    Returns:
        The verdict: score and findings sorted by line.
    """
    try:
        findings, examples = chain.rubric_findings(path, text)
    except (RecursionError, MemoryError):
        # Hostile or machine-generated input nested deeper than any real test: refuse it
        # as unparseable rather than crash the run that checks many files.
        msg = "the file is nested too deeply to parse; treated as not loadable"
        findings, examples = [Finding(path=path, line=1, rule="syntax", message=msg)], 0
    if examples == 0 and not any(f.rule == "syntax" for f in findings):
        findings = [
            Finding(path=path, line=1, rule="no-examples", message="no example or test found"),
            *findings,
        ]
    verdict = StaticVerdict(score=score(findings, examples), findings=findings)
    logger.debug("static rubric %s: score %.3f, %d findings", path, verdict.score, len(findings))
    return verdict


def check_support(path: str, text: str, chain: Toolchain) -> list[Finding]:
    """The static rubric's findings in a support file a reply wrote beside its tests (a
    conftest, a factory, a setup file): only the rules about how results are reported and
    which tests run (``result-hook``, ``hidden-tests``), and ``syntax``; the toolchain parses.

    Args:
        path: The repository-relative path, reported in every finding.
        text: The file's content.
        chain: The project's toolchain.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        msg = "the file is too large to check; treated as not loadable"
        return [Finding(path=path, line=1, rule="syntax", message=msg)]
    try:
        return chain.support_findings(path, text)
    except (RecursionError, MemoryError):
        msg = "the file is nested too deeply to parse; treated as not loadable"
        return [Finding(path=path, line=1, rule="syntax", message=msg)]


def check_reply(
    tests: dict[str, str], support: dict[str, str], chain: Toolchain
) -> StaticVerdict | None:
    """The static rubric over what one reply wrote: every test file (the weakest score counts)
    and every support file beside them, whose forbidden findings cap the score as a test
    file's do. None when the reply wrote no test file."""
    verdicts = [check_spec(path, text, chain) for path, text in tests.items()]
    if not verdicts:
        return None
    beside = [f for path, text in support.items() for f in check_support(path, text, chain)]
    value = min(v.score for v in verdicts)
    if any(f.rule in FORBIDDEN_RULES for f in beside):
        value = min(value, FORBIDDEN_CAP)
    findings = [f for v in verdicts for f in v.findings] + beside
    return StaticVerdict(score=value, findings=findings)


def check_file(repo: Path, rel: str, chain: Toolchain) -> StaticVerdict:
    """Run the static rubric over a test file of a repository.

    Args:
        repo: The repository root.
        rel: The file's path relative to repo.
        chain: The project's toolchain.

    Returns:
        The verdict.

    Raises:
        BadInputError: The file is not of the toolchain's language, the path leaves the
            repository, or the file cannot be read, is too large or is not UTF-8 text.
    """
    if not chain.speaks(rel):
        raise BadInputError(f"{rel}: not a {chain.language} test file")
    root = repo.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root):
        raise BadInputError(f"{rel}: path is outside the repository")
    try:
        size = target.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BadInputError(f"{rel}: file is too large to check ({size} bytes)")
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{rel}: not UTF-8 text") from exc
    except OSError as exc:
        raise BadInputError(f"{rel}: cannot read: {exc.strerror}") from exc
    return check_spec(rel, text, chain)


def gate_passes(verdict: StaticVerdict) -> bool:
    """True when the verdict has no forbidden finding (the static gate of DESIGN.md "Gates")."""
    return not any(f.rule in FORBIDDEN_RULES for f in verdict.findings)
