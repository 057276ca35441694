"""The model's reply formats (DESIGN.md "Model protocol"): the pydantic models of the structured
(JSON) replies with their schemas for prompts, and the parsers of every reply.

The prompts never spell a JSON schema out by hand: the caller renders the schema of one of these
models (``schema_text(Diagnosis)``) into the template variable ``reply_schema`` and asks for it
with ``response_format`` named after ``SCHEMA_NAMES``. Each parser takes the reply text and
returns the useful part or raises ReplyFormatError with one line that says what is wrong; the
model client sends that line back to the model on a re-ask, so it is written for the model to
act on.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from tasks.core.errors import ReplyFormatError

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


# --- parsers ------------------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)

_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\s`]*)[^`]*$")
# A path line: optional '#'s, 'File:'/'Path:', bold or backticks around the path, a trailing colon.
_PATH_LINE = re.compile(
    r"^\s*(?:#+\s*)?(?:(?:\*\*|__)?(?:file|path)(?:\*\*|__)?\s*:(?:\*\*|__)?\s*)?"
    r"(?P<wrap>\*\*|__|`)?(?P<path>[^\s`*]+?)(?P=wrap)?\s*:?\s*$",
    re.IGNORECASE,
)
_DIFF_INFOS = ("diff", "patch", "udiff")
_EXCERPT = 80


@dataclass(frozen=True)
class FencedBlock:
    """One fenced code block of a reply."""

    info: str
    body: str
    header: str | None  # the nearest non-blank line before the opening fence
    line: int  # 1-based line number of the opening fence


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced code block in `text`, in order (``` or ~~~, any length, CommonMark-style).

    Raises:
        ReplyFormatError: a block is opened and never closed.
    """
    lines = text.splitlines()
    blocks: list[FencedBlock] = []
    i = 0
    header: str | None = None
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if not match:
            if lines[i].strip():
                header = lines[i]
            i += 1
            continue
        fence = match.group("fence")
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
        if end is None:
            where = f" after {header.strip()}" if header else ""
            raise ReplyFormatError(f"code block opened on line {i + 1}{where} is never closed")
        body = "\n".join(lines[i + 1 : end])
        blocks.append(FencedBlock(match.group("info").lower(), body, header, i + 1))
        header = None
        i = end + 1
    return blocks


def _path_from_header(header: str | None) -> str | None:
    if header is None:
        return None
    match = _PATH_LINE.match(header)
    if not match:
        return None
    path = match.group("path").strip("`*_")
    # A bare word ("Ruby", "Here") is not a path; a path has a directory or an extension.
    return path if ("/" in path or "\\" in path or "." in path.strip(".")) else None


def check_test_path(path: str, allowed_roots: tuple[str, ...]) -> str:
    """Validate a repository-relative path the model wants to write; return it normalised.

    Raises:
        ReplyFormatError: absolute, escaping (`..`), backslashes, into .git/, or outside the
            allowed test trees.
    """
    if "\\" in path:
        raise ReplyFormatError(f"{path}: backslashes are not allowed in paths; use /")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        raise ReplyFormatError(f"{path}: absolute paths are not allowed; use a repository path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ReplyFormatError(f"{path}: '..' is not allowed in paths")
    if any(p.lower() == ".git" for p in parts):
        raise ReplyFormatError(f"{path}: paths into .git/ are not allowed")
    norm = "/".join(parts)
    if not norm or not any(norm.startswith(root) for root in allowed_roots):
        roots = ", ".join(allowed_roots)
        raise ReplyFormatError(f"{path}: only files under {roots} may be written")
    return norm


def parse_files_reply(
    text: str, allowed_roots: tuple[str, ...] = ("spec/", "tests/")
) -> dict[str, str]:
    """Files from a generator/fixer reply: fenced blocks, each after its path alone on a line.

    The path line may wrap the path in backticks or bold, or prefix it with '#' or 'File:'.
    Code blocks without a path line before them (explanations, shell commands) are ignored.

    Args:
        text: the reply.
        allowed_roots: the test trees files may be written under (spec/ covers spec/factories/
            and spec/support/).

    Returns:
        Repository-relative path -> file content (ending in a newline), in reply order.

    Raises:
        ReplyFormatError: a path is not allowed (named in the message), a path appears twice
            with different contents, a block is unclosed, or the reply holds no file at all.
    """
    files: dict[str, str] = {}
    for block in fenced_blocks(text):
        raw = _path_from_header(block.header)
        if raw is None:
            continue
        path = check_test_path(raw, allowed_roots)
        content = block.body.rstrip("\n") + "\n"
        if not block.body.strip():
            raise ReplyFormatError(f"{path}: the code block is empty")
        if path in files and files[path] != content:
            raise ReplyFormatError(f"{path}: given twice with different contents; give it once")
        files[path] = content
    if not files:
        raise ReplyFormatError(
            "no file found: give every file as a fenced code block with its repository path "
            "alone on the line just before the opening ```"
        )
    return files


def parse_diff_reply(text: str) -> str:
    """The unified diff from a surgeon reply: exactly one ```diff block with ---/+++/@@ lines.

    An unlabelled block is accepted when it is the only block and looks like a diff.

    Returns:
        The diff text, ending in a newline.

    Raises:
        ReplyFormatError: no diff block, several, an empty one, or one that is not a unified diff.
    """
    blocks = fenced_blocks(text)
    diffs = [b for b in blocks if b.info in _DIFF_INFOS]
    if not diffs and len(blocks) == 1 and not blocks[0].info:
        diffs = blocks
    if not diffs:
        raise ReplyFormatError("no ```diff block found: reply with one unified diff in ```diff")
    if len(diffs) > 1:
        raise ReplyFormatError(f"{len(diffs)} diff blocks found: reply with exactly one")
    body = diffs[0].body
    if not body.strip():
        raise ReplyFormatError("the ```diff block is empty")
    lines = body.splitlines()
    has_old = any(line.startswith("--- ") for line in lines)
    has_new = any(line.startswith("+++ ") for line in lines)
    has_hunk = any(re.match(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", line) for line in lines)
    if not (has_old and has_new and has_hunk):
        raise ReplyFormatError(
            "the ```diff block is not a unified diff: it needs '--- a/<path>', '+++ b/<path>' "
            "and '@@ -l,n +l,n @@' hunk headers"
        )
    return body.rstrip("\n") + "\n"


def _json_candidates(text: str) -> list[str]:
    stripped = text.strip()
    candidates = [stripped]
    try:
        blocks = fenced_blocks(stripped)
    except ReplyFormatError:
        blocks = []
    candidates += [b.body for b in blocks if b.info in ("", "json", "jsonc", "javascript")]
    first, last = stripped.find("{"), stripped.rfind("}")
    if 0 <= first < last:
        candidates.append(stripped[first : last + 1])
    return candidates


def _short(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "(root)"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_json_reply(text: str, schema: type[M]) -> M:
    """Validate a JSON reply against `schema`, leniently: ``` fences and prose around are dropped.

    Raises:
        ReplyFormatError: no valid JSON object, or it does not match the schema (first errors
            listed with their field paths).
    """
    decode_error: str | None = None
    schema_error: str | None = None
    for candidate in _json_candidates(text):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as exc:
            decode_error = decode_error or f"invalid JSON: {exc.msg} at line {exc.lineno}"
            continue
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            schema_error = schema_error or f"JSON does not match the schema: {_short(exc)}"
    if schema_error:
        raise ReplyFormatError(schema_error)
    excerpt = " ".join(text.split())[:_EXCERPT]
    raise ReplyFormatError(f"{decode_error or 'invalid JSON: empty reply'} (reply: {excerpt!r})")
