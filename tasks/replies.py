"""Pydantic models of the structured (JSON) model replies, and their schemas for prompts.

The prompts never spell a JSON schema out by hand: the caller renders the schema of one of these
models (``schema_text(Diagnosis)``) into the template variable ``reply_schema`` and asks for it
with ``response_format`` named after ``SCHEMA_NAMES``. Plain data: no I/O here.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Reply(BaseModel):
    # extra="forbid" puts additionalProperties: false into the schema, which strict
    # json_schema response formats require, and rejects replies that invent fields.
    model_config = ConfigDict(extra="forbid")


class CodeBlock(_Reply):
    """A span of code the diagnosis points at."""

    file_path: str = Field(description="Repository-relative path of the file")
    start_line: int = Field(ge=1, description="First line of the span (1-based)")
    end_line: int = Field(ge=1, description="Last line of the span (inclusive)")
    description: str = Field(description="What is wrong or relevant in this span")


class Alternative(_Reply):
    """A competing hypothesis, tried when the main diagnosis turns out wrong."""

    root_cause: str
    repair_strategy: str
    confidence: float = Field(ge=0, le=1)


class Diagnosis(_Reply):
    """The diagnostician's reply (JSON schema name ``diagnosis``).

    ``wrong_side`` says which side of the failure should change: ``"test"`` when the test's
    expectation is stale or wrong (a hard-coded date, an outdated constant, a mis-set mock),
    ``"code"`` when production code has a bug the test rightly catches, ``"both"`` when each
    needs a change. The surgeon uses it to avoid editing production code just to satisfy a test.
    """

    root_cause: str = Field(description="The underlying cause, in one or two sentences")
    affected_code_blocks: list[CodeBlock] = Field(
        description="Spans to change or read, most important first"
    )
    repair_strategy: str = Field(description="What the patch should do, concretely")
    confidence: float = Field(ge=0, le=1, description="Probability the root cause is right")
    wrong_side: Literal["test", "code", "both"] = Field(
        description="Which side should change: the test, the production code, or both"
    )
    alternatives: list[Alternative] = Field(
        min_length=1, max_length=2, description="One or two competing hypotheses"
    )


class JudgeVerdict(_Reply):
    """The judge's reply (JSON schema name ``judge_verdict``)."""

    score: float = Field(ge=0, le=1, description="One of the rubric's levels: 0.0 .. 1.0")
    reasons: list[str] = Field(description="Why this level: concrete observations")
    missing: list[str] = Field(description="Behaviours, paths or assertions that are missing")


class ScoutFailure(_Reply):
    """One failure the scout extracted from a log no parser understood."""

    test_id: str = Field(description="Stable id: file and line, or classname::name")
    name: str
    classname: str = Field(description="Class, module or describe group; empty if unknown")
    file: str | None = Field(description="Test file, repository-relative, if known")
    line: int | None = Field(description="Line in the test file, if known")
    status: Literal["failed", "error"]
    error_type: str | None
    message: str
    trace: str = Field(description="The stack trace exactly as in the log; empty if none")


class ScoutReport(_Reply):
    """The scout's reply (JSON schema name ``scout_failures``)."""

    failures: list[ScoutFailure]


#: The ``response_format`` schema name for each structured reply model.
SCHEMA_NAMES: dict[type[BaseModel], str] = {
    Diagnosis: "diagnosis",
    JudgeVerdict: "judge_verdict",
    ScoutReport: "scout_failures",
}


def schema_text(model: type[BaseModel]) -> str:
    """Render a reply model's JSON schema for the ``reply_schema`` prompt variable.

    Args:
        model: One of the reply models (``Diagnosis``, ``JudgeVerdict``, ``ScoutReport``).

    Returns:
        The JSON schema, indented, with keys in a stable order so prompt hashes stay stable.
    """
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True)
