"""Pydantic models of the structured (JSON) model replies, and their schemas for prompts.

The prompts never spell a JSON schema out by hand: the caller renders the schema of one of these
models (``schema_text(Diagnosis)``) into the template variable ``reply_schema`` and asks for it
with ``response_format`` named after ``SCHEMA_NAMES``. Plain data: no I/O here.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

log = logging.getLogger(__name__)


class _Reply(BaseModel):
    """Strict in what is asked, tolerant in what is read.

    The schema sent to the model is strict: ``additionalProperties: false`` (extra="forbid")
    and every field required, defaults included (the serialization-mode schema), as strict
    json_schema response formats want. A reply is read leniently: fields nobody asked for are
    dropped, and a list the protocol (DESIGN.md) does not insist on may be missing or empty.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_mode_override="serialization",
        json_schema_serialization_defaults_required=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = set(data) - set(cls.model_fields)
            if unknown:
                log.debug("%s reply: ignoring unknown fields %s", cls.__name__, sorted(unknown))
                return {k: v for k, v in data.items() if k in cls.model_fields}
        return data


def _no_default(schema: dict[str, Any]) -> None:
    # A field read with a default is still asked for as required: its schema shows none.
    schema.pop("default", None)


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
    # Asked for as in the schema (a required side, one or two alternatives); read when absent.
    wrong_side: Annotated[
        Literal["test", "code", "both"] | None,
        WithJsonSchema({"enum": ["test", "code", "both"], "type": "string"}),
    ] = Field(
        default=None,
        title="Wrong Side",
        description="Which side should change: the test, the production code, or both",
        json_schema_extra=_no_default,
    )
    alternatives: list[Alternative] = Field(
        default_factory=list,
        description="One or two competing hypotheses",
        json_schema_extra={"minItems": 1, "maxItems": 2},
    )

    @field_validator("alternatives")
    @classmethod
    def _two_best(cls, value: list[Alternative]) -> list[Alternative]:
        # More than asked for is not an error: the two most likely are the ones tried.
        return sorted(value, key=lambda a: -a.confidence)[:2]


class JudgeVerdict(_Reply):
    """The judge's reply (JSON schema name ``judge_verdict``)."""

    score: float = Field(ge=0, le=1, description="One of the rubric's levels: 0.0 .. 1.0")
    reasons: list[str] = Field(
        default_factory=list, description="Why this level: concrete observations"
    )
    missing: list[str] = Field(
        default_factory=list, description="Behaviours, paths or assertions that are missing"
    )


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
