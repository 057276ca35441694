"""The repair roles that read and write text: scout grouping, context, diagnostician, surgeon.

The auditor is in :mod:`tasks.repair_audit`. Everything here is a plain function; the flow wraps
them in Prefect tasks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
from pathlib import Path

from tasks.errors import BadInputError
from tasks.model import ModelClient, parse_diff_reply
from tasks.prompts import render
from tasks.repair import CodeSnippet, FailureGroup, GroupContext, GroupState
from tasks.replies import Diagnosis, ScoutReport, schema_text
from tasks.secrets import read_for_prompt, redact
from tasks.stacktrace import locations_from_trace
from tasks.types import Mapping, TestCaseResult

log = logging.getLogger(__name__)

#: Lines shown on each side of a stack-trace location.
CONTEXT_LINES = 12
#: Bounds on what one request carries, so a huge repository never floods a prompt.
MAX_CODE_CHARS = 24_000
MAX_GIT_CHARS = 8_000
MAX_FAILURES = 8
MAX_TRACE_CHARS = 3_000
GIT_LOG_COMMITS = 3
#: The end of a raw log is sent to the scout: runners print their failure summary last.
MAX_LOG_CHARS = 40_000
#: What the report parser says about a file that is no report (a raw log, for the scout).
NOT_A_REPORT = "not a JUnit XML or RSpec JSON report"

_TEST_DIRS = ("spec/", "tests/", "test/")
_TRAILING_TYPE = re.compile(r":\s*([A-Z][\w.:]*(?:Error|Exception|Failure|Mismatch|NotMet)\w*)\s*$")


def is_test_path(path: str) -> bool:
    """True for files of the test tree (specs, tests, factories, conftest)."""
    name = path.rsplit("/", 1)[-1]
    return (
        path.startswith(_TEST_DIRS)
        or "/spec/" in path
        or "/tests/" in path
        or name.endswith("_spec.rb")
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def error_type_of(case: TestCaseResult) -> str:
    """The error class; pytest's JUnit output leaves it out, its trace ends with it."""
    if case.error_type:
        return case.error_type
    last = (case.trace or "").strip().rsplit("\n", 1)[-1]
    m = _TRAILING_TYPE.search(last)
    return m.group(1) if m else "(unknown)"


def message_shape(message: str | None) -> str:
    """A message with its varying parts (numbers, quoted text, ids, addresses) blanked out."""
    text = (message or "").strip().split("\n", 1)[0]
    text = re.sub(r"0x[0-9a-fA-F]+", "<hex>", text)
    text = re.sub(r"\"[^\"]*\"|'[^']*'", "<str>", text)
    text = re.sub(r"#<[^>]*>", "<obj>", text)
    text = re.sub(r"\d+(?:\.\d+)?", "<n>", text)
    return re.sub(r"\s+", " ", text)[:160]


def innermost_project_frame(case: TestCaseResult) -> str:
    """The innermost repository frame outside the test tree, as path:line, or ''."""
    for loc in reversed(case.locations):
        if not loc.path.startswith("/") and not is_test_path(loc.path):
            return f"{loc.path}:{loc.line}"
    return ""


def _safe_relpath(path: str | None) -> str | None:
    """A model-given test path only when it is a plain relative path (no '..', not absolute)."""
    if not path:
        return None
    path = path.removeprefix("./")
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..", ".git") for p in parts):
        return None
    return path


def scout_log(client: ModelClient, log_path: Path, repo: Path) -> list[TestCaseResult]:
    """Failures from a raw test log that no parser understands, read by the scout model.

    The reply is untrusted: test paths that are not plain relative paths are dropped, and
    locations come from parsing the copied stack traces, not from the model.

    Raises:
        ModelError: the call failed, or the reply stayed malformed after re-asks.
        OSError: the log cannot be read.
    """
    data = log_path.read_bytes()
    text = redact(data[-MAX_LOG_CHARS:].decode("utf-8", errors="replace"))
    about = str(log_path)
    prompt = render("scout", path=about, log=text, reply_schema=schema_text(ScoutReport))
    report, _ = client.structured(
        "scout",
        prompt.messages(),
        ScoutReport,
        schema_name="scout_failures",
        prompt=prompt.meta,
        about=about,
    )
    cases: list[TestCaseResult] = []
    for f in report.failures:
        locations = [
            loc for loc in locations_from_trace(f.trace, repo) if not loc.path.startswith("/")
        ]
        cases.append(
            TestCaseResult(
                id=f.test_id,
                name=f.name,
                classname=f.classname,
                file=_safe_relpath(f.file),
                line=f.line,
                status=f.status,
                message=f.message,
                error_type=f.error_type,
                trace=f.trace or None,
                locations=locations,
            )
        )
    return cases


def _sources_of(mapping: Mapping | None) -> dict[str, str]:
    owners: dict[str, str] = {}
    for f in mapping.files if mapping else []:
        for spec in f.specs:
            owners.setdefault(spec, f.source)
    return owners


def group_failures(
    cases: list[TestCaseResult], mapping: Mapping | None = None
) -> list[FailureGroup]:
    """Group failing and erroring cases by signature, so one cause is repaired once.

    The signature: error type, message shape, innermost project frame, and the source file the
    failing spec is mapped to. Passing and skipped cases are ignored.

    Args:
        cases: Cases from the reports (any status).
        mapping: The repository's source -> spec mapping, for the source part.

    Returns:
        Groups in the order their first failure appears.
    """
    owners = _sources_of(mapping)
    groups: dict[str, FailureGroup] = {}
    for case in cases:
        if case.status not in ("failed", "error"):
            continue
        etype = error_type_of(case)
        shape = message_shape(case.message)
        frame = innermost_project_frame(case)
        source = owners.get(case.file or "")
        signature = f"{etype} | {shape} | {frame or '-'} | {source or '-'}"
        if signature in groups:
            groups[signature].tests.append(case)
            continue
        gid = "g-" + hashlib.sha256(signature.encode()).hexdigest()[:10]
        groups[signature] = FailureGroup(
            id=gid,
            signature=signature,
            error_type=etype,
            message_shape=shape,
            frame=frame,
            source=source,
            tests=[case],
        )
    return list(groups.values())


def _spans(lines_wanted: list[int], total: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for line in sorted(set(lines_wanted)):
        start, end = max(1, line - CONTEXT_LINES), min(total, line + CONTEXT_LINES)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def code_context(project: Path, group: FailureGroup) -> list[CodeSnippet]:
    """Code around the stack-trace locations, plus the mapped source file, bounded.

    Files that look like secrets or leave the repository are skipped (logged), never read.
    """
    wanted: dict[str, list[int]] = {}
    for case in group.tests[:MAX_FAILURES]:
        for loc in case.locations:
            if not loc.path.startswith("/"):
                wanted.setdefault(loc.path, []).append(loc.line)
        if case.file and case.line and case.file not in wanted:
            wanted.setdefault(case.file, []).append(case.line)
    if group.source:
        wanted.setdefault(group.source, [])
    snippets: list[CodeSnippet] = []
    used = 0
    # Production code first: that is what a post-merge regression usually changed.
    for path in sorted(wanted, key=lambda p: (is_test_path(p), p)):
        try:
            text = read_for_prompt(project, path)
        except BadInputError as exc:
            log.info("context: %s", exc)
            continue
        lines = text.splitlines()
        spans = _spans(wanted[path], len(lines)) if wanted[path] else [(1, len(lines))]
        for start, end in spans:
            body = "\n".join(lines[start - 1 : end])
            if used + len(body) > MAX_CODE_CHARS:
                body = body[: max(0, MAX_CODE_CHARS - used)]
                if not body:
                    return snippets
            used += len(body)
            snippets.append(CodeSnippet(path=path, start_line=start, end_line=end, text=body))
    return snippets


def extend_context(project: Path, state: GroupState) -> int:
    """Add the code blocks the latest diagnosis points at to the group's context.

    The stack trace often stops in the test; the diagnosis names the production code to change,
    which the surgeon must see. Paths come from the model: ``read_for_prompt`` refuses secrets
    and anything outside the repository. Bounded like the rest of the context.

    Returns:
        How many snippets were added.
    """
    ctx, diagnosis = state.context, state.diagnosis
    if ctx is None or diagnosis is None:
        return 0
    used = sum(len(c.text) for c in ctx.code)
    added = 0
    for block in diagnosis.affected_code_blocks:
        covered = any(
            c.path == block.file_path
            and c.start_line <= block.start_line
            and block.end_line <= c.end_line
            for c in ctx.code
        )
        if covered:
            continue
        try:
            lines = read_for_prompt(project, block.file_path).splitlines()
        except BadInputError as exc:
            log.info("context: %s", exc)
            continue
        start = max(1, min(block.start_line, block.end_line) - CONTEXT_LINES)
        end = min(len(lines), max(block.start_line, block.end_line) + CONTEXT_LINES)
        body = "\n".join(lines[start - 1 : end])
        if not body or used + len(body) > MAX_CODE_CHARS:
            continue
        used += len(body)
        ctx.code.append(
            CodeSnippet(path=block.file_path, start_line=start, end_line=end, text=body)
        )
        added += 1
    return added


def git_changes(project: Path, paths: list[str]) -> str:
    """Recent commits (with their patches) touching `paths`, cut to MAX_GIT_CHARS."""
    if not paths:
        return ""
    argv = ["git", "-C", str(project), "log", "-p", "--no-color", "--no-ext-diff"]
    argv += [f"-n{GIT_LOG_COMMITS}", "--format=commit %h %ad %s", "--date=short", "--", *paths]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("git log in %s failed: %s", project, exc)
        return ""
    text = done.stdout
    return text if len(text) <= MAX_GIT_CHARS else text[:MAX_GIT_CHARS] + "\n[truncated]"


def format_failures(cases: list[TestCaseResult]) -> str:
    """The failing examples as the tools reported them (ids, types, messages, traces)."""
    out = [f"Failing examples ({len(cases)}):"]
    for case in cases[:MAX_FAILURES]:
        out.append(f"- {case.id}: {case.name} [{case.status}]")
        head = ": ".join(s for s in (error_type_of(case), case.message) if s)
        out.append("  " + head.replace("\n", "\n  "))
        if case.trace:
            out.append("  " + case.trace.strip()[:MAX_TRACE_CHARS].replace("\n", "\n  "))
    if len(cases) > MAX_FAILURES:
        out.append(f"... and {len(cases) - MAX_FAILURES} more with the same signature")
    return "\n".join(out)


def build_context(project: Path, group: FailureGroup, language: str) -> GroupContext:
    """Everything the diagnostician and the surgeon see about `group`."""
    code = code_context(project, group)
    files = sorted({c.path for c in code})
    failures = [
        {
            "id": c.id,
            "error_type": error_type_of(c),
            "message": (c.message or "")[:MAX_TRACE_CHARS],
            "trace": (c.trace or "")[:MAX_TRACE_CHARS],
        }
        for c in group.tests[:MAX_FAILURES]
    ]
    return GroupContext(
        path=group.primary_path,
        language="ruby" if language == "ruby" else "python",
        failures=failures,
        code=code,
        git_changes=git_changes(project, files),
        failure_output=format_failures(group.tests),
    )


def diagnose(client: ModelClient, state: GroupState) -> Diagnosis:
    """Ask the diagnostician about the group (with the feedback of a rejected diagnosis).

    Raises:
        ModelError: the call failed, or the reply stayed malformed after re-asks.
    """
    ctx = state.context
    assert ctx is not None, "build the context first"
    prompt = render(
        "diagnose",
        path=ctx.path,
        language=ctx.language,
        failures=ctx.failures,
        code_context=[c.model_dump() for c in ctx.code],
        git_changes=ctx.git_changes,
        feedback=state.feedback,
        reply_schema=schema_text(Diagnosis),
    )
    diagnosis, record = client.structured(
        "diagnostician",
        prompt.messages(),
        Diagnosis,
        schema_name="diagnosis",
        prompt=prompt.meta,
        about=ctx.path,
    )
    state.tokens += record.input_tokens + record.output_tokens
    return diagnosis


def surgeon(client: ModelClient, state: GroupState) -> str:
    """Ask the surgeon for a unified diff; a revision carries the previous patch and re-run.

    Raises:
        ModelError: the call failed, or the reply stayed malformed after re-asks.
    """
    ctx, diagnosis = state.context, state.diagnosis
    assert ctx is not None and diagnosis is not None, "diagnose first"
    previous = state.last_attempt
    # A revision under the same diagnosis carries the previous patch; after a new diagnosis the
    # surgeon starts afresh from the original code.
    same_diagnosis = previous is not None and previous.diagnosis_index == len(state.diagnoses) - 1
    prev_patch = previous.patch if previous is not None and same_diagnosis else ""
    prev_output = ""
    if previous is not None and same_diagnosis and previous.audit is not None:
        prev_output = "\n".join(
            s for s in (previous.audit.feedback, previous.audit.rerun_output) if s
        )
    prompt = render(
        "surgeon",
        path=ctx.path,
        language=ctx.language,
        diagnosis=json.dumps(diagnosis.model_dump(mode="json"), indent=2),
        code_context=[c.model_dump() for c in ctx.code],
        failure_output=ctx.failure_output,
        previous_patch=prev_patch,
        previous_output=prev_output,
        style_notes="",
    )
    patch, record = client.complete_parsed(
        "surgeon", prompt.messages(), parse_diff_reply, prompt=prompt.meta, about=ctx.path
    )
    state.tokens += record.input_tokens + record.output_tokens
    return patch
