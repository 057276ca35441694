"""The repair roles that read and write text: a group's context, diagnostician, surgeon.

The scout is :mod:`tasks.repair.scout`, the auditor :mod:`tasks.repair.review`. Everything here
is a plain function; the flow runs them inside one Prefect task per group.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from tasks.core.errors import AutopilotError, BadInputError
from tasks.core.secrets import read_for_prompt, redact
from tasks.core.types import Exchange, TestCaseResult
from tasks.keep.git_safe import NO_DIFF_PROGRAMS, GitError, TamperedWorktreeError, run_git
from tasks.model.client import CallRecord, ModelClient, parse_diff_reply
from tasks.model.messages import prepare_messages
from tasks.model.prompts import RenderedPrompt, render
from tasks.model.replies import Diagnosis, schema_text
from tasks.repair.cache import ReplyCache, reply_key
from tasks.repair.scout import error_type_of
from tasks.repair.state import CodeSnippet, FailureGroup, GroupContext, GroupState
from tasks.toolchains.base import Toolchain
from tasks.toolchains.files import FileRules

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Lines shown on each side of a stack-trace location.
CONTEXT_LINES = 12
#: Bounds on what one request carries, so a huge repository never floods a prompt.
MAX_CODE_CHARS = 24_000
MAX_GIT_CHARS = 8_000
MAX_FAILURES = 8
MAX_TRACE_CHARS = 3_000
GIT_LOG_COMMITS = 3


def _spans(lines_wanted: list[int], total: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for line in sorted(set(lines_wanted)):
        start, end = max(1, line - CONTEXT_LINES), min(total, line + CONTEXT_LINES)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def code_context(project: Path, group: FailureGroup, rules: FileRules) -> list[CodeSnippet]:
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
    for path in sorted(wanted, key=lambda p: (rules.is_test_side(p), p)):
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
    """Recent commits (with their patches) touching `paths`, cut to MAX_GIT_CHARS.

    Read from history only, through the hardened git of :mod:`tasks.keep.git_safe`: no textconv or
    external diff program runs, and in a worktree the sandbox used git reads the repository the
    worktree was made from, after checking the worktree's ``.git`` link.
    """
    if not paths:
        return ""
    argv = ["log", "-p", "--no-color", *NO_DIFF_PROGRAMS, f"-n{GIT_LOG_COMMITS}"]
    argv += ["--format=commit %h %ad %s", "--date=short", "--", *paths]
    try:
        done = run_git(argv, cwd=project, check=False, timeout=30)
    except TamperedWorktreeError:
        raise
    except GitError as exc:
        log.warning("git log in %s failed: %s", project, exc)
        return ""
    text = redact(done.stdout.decode("utf-8", errors="replace"))
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


def build_context(project: Path, group: FailureGroup, chain: Toolchain) -> GroupContext:
    """Everything the diagnostician and the surgeon see about `group`."""
    code = code_context(project, group, chain.file_rules(project))
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
        language=chain.language,
        failures=failures,
        code=code,
        git_changes=git_changes(project, files),
        failure_output=format_failures(group.tests),
    )


def _exchange(state: GroupState, prompt: RenderedPrompt, about: str) -> Exchange:
    """A new archived exchange on the group for this prompt (its replies are filled in later),
    holding the messages exactly as they are sent: redacted, naming the file `about`."""
    exchange = Exchange(
        iteration=len(state.exchanges) + 1,
        prompt_name=prompt.meta.name,
        prompt_version=prompt.meta.version,
        prompt_sha256=prompt.meta.sha256,
        messages=prepare_messages(prompt.messages(), about),
    )
    state.exchanges.append(exchange)
    return exchange


def _asked(
    state: GroupState,
    exchange: Exchange,
    call: Callable[[list[str]], tuple[T, CallRecord]],
) -> T:
    """`call` (given the list its raw replies go to), with its error or tokens on `exchange`
    and its tokens counted on the group."""
    try:
        value, record = call(exchange.replies)
    except AutopilotError as exc:
        exchange.error = str(exc)
        raise
    exchange.tokens = record.input_tokens + record.output_tokens
    state.tokens += exchange.tokens
    return value


def diagnose(client: ModelClient, state: GroupState, cache: ReplyCache | None = None) -> Diagnosis:
    """Ask the diagnostician about the group (with the feedback of a rejected diagnosis).

    With a `cache`, the same question (same prompt, messages and model) is answered from disk.

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
        examples=ctx.examples,
        history=ctx.history,
    )
    key = reply_key(
        "diagnostician", client.model_for("diagnostician"), prompt.meta, prompt.messages()
    )
    exchange = _exchange(state, prompt, ctx.path)
    cached = cache.get(key) if cache else None
    if cached is not None:
        with contextlib.suppress(ValidationError):
            diagnosis = Diagnosis.model_validate_json(cached)
            exchange.replies.append(cached)
            exchange.cached = True
            return diagnosis
    diagnosis = _asked(
        state,
        exchange,
        lambda replies: client.structured(
            "diagnostician",
            prompt.messages(),
            Diagnosis,
            schema_name="diagnosis",
            prompt=prompt.meta,
            about=ctx.path,
            replies=replies,
        ),
    )
    if cache:
        cache.put(key, diagnosis.model_dump_json())
    return diagnosis


def surgeon(client: ModelClient, state: GroupState, cache: ReplyCache | None = None) -> str:
    """Ask the surgeon for a unified diff; a revision carries the previous patch and re-run.

    With a `cache`, the same question (same prompt, messages and model) is answered from disk.

    Raises:
        ModelError: the call failed, or the reply stayed malformed after re-asks.
    """
    ctx, diagnosis = state.context, state.diagnosis
    assert ctx is not None and diagnosis is not None, "diagnose first"
    previous = state.last_attempt
    # Every patch after the first carries the previous one and what its re-run said, also after
    # a new diagnosis: the surgeon must know what did not work (and the question then differs
    # from the first one, so the reply cache cannot hand back the rejected patch).
    prev_patch = previous.patch if previous is not None else ""
    prev_output = ""
    if previous is not None and previous.audit is not None:
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
        examples=ctx.examples,
        history=ctx.history,
    )
    key = reply_key("surgeon", client.model_for("surgeon"), prompt.meta, prompt.messages())
    exchange = _exchange(state, prompt, ctx.path)
    cached = cache.get(key) if cache else None
    if cached is not None:
        exchange.replies.append(cached)
        exchange.cached = True
        return cached
    patch = _asked(
        state,
        exchange,
        lambda replies: client.complete_parsed(
            "surgeon",
            prompt.messages(),
            parse_diff_reply,
            prompt=prompt.meta,
            about=ctx.path,
            replies=replies,
        ),
    )
    if cache:
        cache.put(key, patch)
    return patch
