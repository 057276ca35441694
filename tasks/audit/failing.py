"""Which source a failing test makes ``failing``, and how a failing test is named in the audit.

A source is failing through its own tests only, never because a failing test merely ran a line
of it. Each failing test (status ``failed`` or ``error``) is given to sources by the first rule
that names any:

1. ``mapping``: the sources its test file is mapped to by the stack's rules (the test file is
   theirs, whatever else it executes); a test file mapped to several sources (a Jest test
   named after a feature maps to what it imports) gives it to the one of them holding the
   innermost frame of the test's stack trace, when one does;
2. ``trace``: for a test file mapped to no source, the source file holding the innermost frame
   of the test's stack trace (where the failure was raised);
3. ``coverage``: else the source whose function bodies that test file ran the most lines of
   (ties: the first path), from the run's per-test-file evidence;

and to none otherwise (it is still listed). One regression in one module therefore makes one
source failing, not every source its test file executed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from tasks.core.types import Mapping, TestCaseResult, TestStatus

__all__ = ["Attribution", "FailingTest", "failing_tests", "message_head"]

Attribution = Literal["mapping", "trace", "coverage"]

#: A failure message's head: at most this many characters of its first non-blank lines.
MESSAGE_HEAD_CHARS = 200
HEAD_LINES = 3


class FailingTest(BaseModel):
    """One failing test in the audit's JSON: who it is, what it said, where it failed."""

    id: str = Field(description="The test's id, as `autopilot parse` makes it")
    status: TestStatus
    file: str | None = Field(None, description="Its test file, relative to the project")
    message: str | None = Field(
        None, description="The head of its failure message: its first lines, in one line"
    )
    location: str | None = Field(
        None,
        description="Where it failed, path:line: the innermost stack frame inside the project, "
        "else the test's own file and line",
    )
    sources: list[str] = Field(
        default_factory=list, description="The sources this failure makes failing"
    )
    attributed_by: Attribution | None = Field(
        None, description="The rule that chose `sources` (none chose any: null)"
    )


def message_head(case: TestCaseResult) -> str | None:
    """The failure message's first lines (else the trace's) in one line, bounded: RSpec puts
    "expected" and "got" on two lines, pytest the assertion and its "where"."""
    for text in (case.message, case.trace):
        lines = [" ".join(line.split()) for line in (text or "").splitlines() if line.strip()]
        if lines:
            head = " ".join(lines[:HEAD_LINES])
            cut = len(head) > MESSAGE_HEAD_CHARS or len(lines) > HEAD_LINES
            return head[: MESSAGE_HEAD_CHARS - 3] + "..." if cut else head
    return None


def _location(case: TestCaseResult, key: str | None) -> str | None:
    inside = [loc for loc in case.locations if not loc.path.startswith("/")]
    if inside:
        return f"{inside[-1].path}:{inside[-1].line}"
    if key is None:
        return None
    return f"{key}:{case.line}" if case.line else key


def _most_run(runs: dict[str, dict[str, int]], test_file: str, sources: set[str]) -> str | None:
    counts = {s: by_test.get(test_file, 0) for s, by_test in runs.items() if s in sources}
    best = max(counts.values(), default=0)
    return min((s for s, n in counts.items() if n == best), default=None) if best else None


def _attribute(
    case: TestCaseResult,
    key: str | None,
    owners: dict[str, list[str]],
    sources: set[str],
    runs: dict[str, dict[str, int]],
) -> tuple[list[str], Attribution | None]:
    raised = [loc.path for loc in case.locations if loc.path in sources]
    mapped = owners.get(key, []) if key is not None else []
    if mapped:
        narrowed = [path for path in raised if path in mapped]
        return ([narrowed[-1]] if len(mapped) > 1 and narrowed else mapped), "mapping"
    if raised:
        return [raised[-1]], "trace"
    found = _most_run(runs, key, sources) if key is not None else None
    return ([found], "coverage") if found else ([], None)


def failing_tests(
    cases: Iterable[TestCaseResult],
    mapping: Mapping,
    keys: dict[str, str],
    body_lines_run: dict[str, dict[str, int]],
) -> list[FailingTest]:
    """Every failed or erroring case of the run, named, with the sources it makes failing.

    Args:
        cases: the suite run's cases, in run order.
        mapping: the source -> test file mapping.
        keys: a case's reported file -> its test file relative to the project.
        body_lines_run: source -> test file -> function-body lines it ran (the evidence).
    """
    owners: dict[str, list[str]] = {}
    for mf in mapping.files:
        for spec in mf.specs:
            owners.setdefault(spec, []).append(mf.source)
    sources = {mf.source for mf in mapping.files}
    out: list[FailingTest] = []
    for case in cases:
        if case.status not in ("failed", "error"):
            continue
        key = keys.get(case.file) if case.file else None
        chosen, rule = _attribute(case, key, owners, sources, body_lines_run)
        out.append(
            FailingTest(
                id=case.id,
                status=case.status,
                file=key,
                message=message_head(case),
                location=_location(case, key),
                sources=chosen,
                attributed_by=rule,
            )
        )
    return out
