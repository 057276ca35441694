"""The static rubric: deterministic checks of a test file against judge/rubric.md.

Ruby specs are parsed with tree-sitter (tasks/toolchains/ruby/rubric.py), Python tests with `ast`
(tasks/toolchains/python/rubric.py); no rule looks at raw text.

Scoring (deterministic, documented so a score can be explained):
    score = max(0, 1 - sum(weight of each finding) / number of examples)
    then capped at FORBIDDEN_CAP when any forbidden rule fired, and rounded to 3 decimals.
A file that does not parse, or that has no example at all, scores 0.0. A finding that leaves its
example proving nothing precise (vague matcher, type-only, bare assert, over-mocking) weighs a
whole example; smells (error without message, sleep, @ivars) weigh a quarter. Normalising by the
number of examples means one vague matcher in a twenty-example spec costs 0.05, while the same
matcher in every example drives the score to 0. The weights were chosen so that the static score
orders the labelled calibration cases (judge/calibration/) like their rubric labels.

Forbidden rules make the static gate fail (`gate_passes`): the spec is structurally broken in a
way the rubric scores 0.0 (private methods, no assertion, "does not crash" tests, stubbing every
instance) or cannot even load. Other rules only lower the score.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tasks.core.errors import BadInputError
from tasks.core.types import Finding, StaticVerdict
from tasks.toolchains.python import rubric as static_python
from tasks.toolchains.ruby import rubric as static_ruby

logger = logging.getLogger(__name__)

SpecLanguage = Literal["ruby", "python"]

#: Score ceiling of a file with any forbidden finding (rubric: "most tests lack meaning").
FORBIDDEN_CAP = 0.2
#: Files larger than this are not parsed: test files are never this big, hostile input may be.
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class Rule:
    """One static rule: its id, whether it fails the gate, and its score weight."""

    id: str
    forbidden: bool
    weight: float
    description: str
    languages: tuple[SpecLanguage, ...] = ("ruby", "python")


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
            ("ruby",),
        ),
        Rule(
            "any-instance-mock",
            True,
            1.0,
            "allow_any_instance_of / expect_any_instance_of",
            ("ruby",),
        ),
        Rule(
            "vague-matcher",
            False,
            1.0,
            "be_truthy, be_falsey, be_present, be_blank, be_between, include(:key)",
            ("ruby",),
        ),
        Rule("type-only", False, 1.0, "a type check (be_a / isinstance) is the only check"),
        Rule("bare-assert", False, 1.0, "`assert x` with no comparison", ("python",)),
        Rule(
            "not-none-only",
            False,
            1.0,
            "`assert x is not None` is a test's only check",
            ("python",),
        ),
        Rule("over-mocking", False, 1.0, "more than 3 stubs, doubles or patches in one test"),
        Rule("raises-without-match", False, 0.25, "error path checked without its message"),
        Rule("sleep", False, 0.25, "sleep in a test"),
        Rule("instance-variable", False, 0.25, "@ivar set in a spec instead of let", ("ruby",)),
    )
}

FORBIDDEN_RULES: frozenset[str] = frozenset(r.id for r in RULES.values() if r.forbidden)

_EXTENSIONS: dict[str, SpecLanguage] = {".rb": "ruby", ".py": "python"}


def language_for(path: str) -> SpecLanguage | None:
    """The spec language of a path by its extension, or None when it is neither Ruby nor Python."""
    return _EXTENSIONS.get(Path(path).suffix.lower())


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


def check_spec(path: str, text: str, language: SpecLanguage) -> StaticVerdict:
    """Run the static rubric over one test file's text.

    Args:
        path: The repository-relative path, reported in every finding.
        text: The file's content.
        language: "ruby" (RSpec) or "python" (pytest).

    Returns:
        The verdict: score and findings sorted by line.

    Raises:
        BadInputError: The language is not one of "ruby" or "python".
    """
    if language not in ("ruby", "python"):
        raise BadInputError(f"{path}: unsupported spec language {language!r}")
    analyse = static_ruby.analyse if language == "ruby" else static_python.analyse
    try:
        findings, examples = analyse(path, text)
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


def check_file(repo: Path, rel: str) -> StaticVerdict:
    """Run the static rubric over a file of a repository, choosing the language by extension.

    Args:
        repo: The repository root.
        rel: The file's path relative to repo.

    Returns:
        The verdict.

    Raises:
        BadInputError: The extension is not .rb or .py, the path leaves the repository, or the
            file cannot be read, is too large or is not UTF-8 text.
    """
    language = language_for(rel)
    if language is None:
        raise BadInputError(f"{rel}: not a Ruby or Python test file")
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
    return check_spec(rel, text, language)


def gate_passes(verdict: StaticVerdict) -> bool:
    """True when the verdict has no forbidden finding (the static gate of DESIGN.md "Gates")."""
    return not any(f.rule in FORBIDDEN_RULES for f in verdict.findings)
