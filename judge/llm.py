"""The LLM judge: the rubric, the source, the spec and the support files written with it to the
judge model, N samples, the median.

The execution gate is part of the API: :func:`judge_with_model` takes the passing
:class:`ValidationResult` as its proof and refuses anything else, so a spec that does not load can
never be scored (the field report's "missing parenthesis scored 0.75" problem).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from judge.rubric import Rubric, load_rubric
from tasks.core.errors import AutopilotError
from tasks.core.types import PromptMeta, StaticVerdict, ValidationResult

if TYPE_CHECKING:
    from tasks.model.client import CallRecord, ModelClient

log = logging.getLogger(__name__)


class ExecutionGateError(AutopilotError):
    """Judging was asked for a spec that did not pass execution."""


class LLMVerdict(BaseModel):
    """The LLM judge's verdict over its samples."""

    score: float = Field(ge=0, le=1, description="Median of the samples, on a rubric level")
    samples: list[float]
    spread: float = Field(ge=0, description="max - min over the samples")
    reasons: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    tokens: int = 0
    prompt_version: str = ""
    rubric_version: str = ""
    prompt: PromptMeta | None = Field(None, exclude=True, description="The prompt sent")
    messages: list[dict[str, str]] = Field(
        default_factory=list,
        exclude=True,
        description="The messages exactly as sent (redacted, naming the spec): for the archive",
    )


def combined_score(static: StaticVerdict | None, llm: LLMVerdict | None, passed: bool) -> float:
    """The one score a file gets: 0 when it did not pass; the LLM median capped by the static
    score when the static rubric found something forbidden (its score is then at most 0.2);
    the static score alone when no model is configured."""
    if not passed:
        return 0.0
    if llm is None:
        return static.score if static is not None else 0.0
    if static is not None and static.score < llm.score and static.score <= 0.2:
        return static.score
    return llm.score


def judge_with_model(
    client: ModelClient,
    *,
    proof: ValidationResult,
    spec_path: str,
    spec_text: str,
    source_path: str,
    source_text: str,
    language: str,
    samples: int = 3,
    rubric: Rubric | None = None,
    records: list[CallRecord] | None = None,
    support_files: Mapping[str, str] | None = None,
) -> LLMVerdict:
    """Score a spec on the rubric with `samples` judge calls; the median counts.

    Args:
        client: the model client (its `judge` role).
        proof: the validation result of this spec; it must have passed.
        spec_path: repository-relative path of the spec (the request is about it).
        spec_text: the spec's text (already read through the secret filter).
        source_path: repository-relative path of the source under test.
        source_text: the source's text.
        language: the tests' language (the toolchain's).
        samples: how many judge calls; scores vary between runs even at temperature 0.
        rubric: the rubric (default judge/rubric.md).
        records: when given, every call's record is appended to it.
        support_files: path -> text of the support files written with the spec (a conftest, a
            factory, a setup file), shown to the judge labelled as such: they run with every
            test of the project.

    Raises:
        ExecutionGateError: `proof` did not pass: no model call is made.
        ModelError: the judge call failed after retries and re-asks.
    """
    if not proof.passed:
        raise ExecutionGateError(
            f"{spec_path}: not judged: it did not pass execution "
            f"({proof.load_error or proof.reason or 'failing examples'})"
        )
    from tasks.model.messages import prepare_messages
    from tasks.model.prompts import render
    from tasks.model.replies import JudgeVerdict, schema_text

    rubric = rubric or load_rubric()
    rendered = render(
        "judge",
        path=spec_path,
        language=language,
        source_path=source_path,
        source=source_text,
        spec=spec_text,
        support_files=[{"path": p, "text": t} for p, t in sorted((support_files or {}).items())],
        rubric=rubric.text,
        reply_schema=schema_text(JudgeVerdict),
    )
    # Rendered and prepared once: what is sent is what the archive keeps.
    messages = prepare_messages(rendered.messages(), spec_path)
    scores: list[float] = []
    reasons: list[str] = []
    missing: list[str] = []
    tokens = 0
    for _ in range(max(1, samples)):
        verdict, record = client.structured(
            "judge",
            messages,
            JudgeVerdict,
            schema_name="judge_verdict",
            prompt=rendered.meta,
            about=spec_path,
        )
        if records is not None:
            records.append(record)
        tokens += record.input_tokens + record.output_tokens
        scores.append(rubric.nearest_level(verdict.score))
        reasons.extend(r for r in verdict.reasons if r not in reasons)
        missing.extend(m for m in verdict.missing if m not in missing)
    median = rubric.nearest_level(statistics.median(scores))
    log.info("judged %s: %.2f (samples %s)", spec_path, median, scores)
    return LLMVerdict(
        score=median,
        samples=scores,
        spread=round(max(scores) - min(scores), 6),
        reasons=reasons,
        missing=missing,
        tokens=tokens,
        prompt_version=rendered.meta.version,
        rubric_version=rubric.version,
        prompt=rendered.meta,
        messages=messages,
    )
