"""Shared pydantic types passed between steps. Plain data: no I/O here."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.counts import CaseTally

TestStatus = Literal["passed", "failed", "error", "skipped"]
#: A toolchain's registry name (``ruby-rspec``, ``python-pytest``; see
#: tasks/toolchains/registry.py, which validates it where a toolchain is chosen).
ToolchainName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]
#: How a source file is tested: a kind its toolchain declares (``Toolchain.kinds``: ``model``,
#: ``controller``... for Rails, ``python``); exactly one skill applies per kind.
SourceKind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unrecorded(value: object) -> bool:
    return value is None


class PromptMeta(BaseModel):
    """Which prompt template produced a request: recorded with every call, part of cache keys."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    sha256: str


class Location(_Model):
    """A source location taken from a stack trace (repository-relative when inside the repo)."""

    path: str
    line: int


class OtherResult(_Model):
    """A further result reported for the same case (the case's status is its most severe one).

    ``kind`` is the element that carried it: ``failure``, ``error`` or ``skipped``, or one of
    Surefire's re-run records (``rerunFailure``, ``rerunError``, ``flakyFailure``,
    ``flakyError``).
    """

    kind: str
    message: str | None = None
    error_type: str | None = None
    trace: str | None = None


class TestCaseResult(_Model):
    """One test case (example) from a report, normalised across dialects."""

    __test__ = False  # not a pytest test class

    id: str = Field(
        description="Unique within a run: file, line, class and name as far as known "
        "(RSpec JSON: the example id); a repeated case gets '#2', '#3'... and duplicate_of"
    )
    name: str
    classname: str = ""
    file: str | None = None
    line: int | None = None
    status: TestStatus
    duration: float = 0.0
    message: str | None = None
    error_type: str | None = None
    trace: str | None = None
    locations: list[Location] = Field(
        default_factory=list, description="Stack trace locations, innermost last"
    )
    other_results: list[OtherResult] = Field(
        default_factory=list, description="The case's further results, in report order"
    )
    duplicate_of: str | None = Field(
        default=None, description="The id of the earlier case this one repeats, if any"
    )
    stdout: str | None = Field(default=None, exclude=True)
    stderr: str | None = Field(default=None, exclude=True)


class RunSummary(_Model):
    tests: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    duration: float = 0.0
    duplicates: int = Field(default=0, description="Cases that repeat an earlier case's id")

    @classmethod
    def of(cls, cases: list[TestCaseResult]) -> RunSummary:
        """The summary of `cases` (in their order: the duration is a float sum)."""
        tally = CaseTally()
        for c in cases:
            tally.add(c.status, c.duration, c.duplicate_of is not None)
        return cls(**tally.summary())


class FileError(_Model):
    """An input file that could not be used, and why (one line)."""

    file: str
    error: str
    not_a_report: bool = Field(
        False, exclude=True, description="It holds no report at all (a raw log, say)"
    )


class TestRun(_Model):
    """The normalised content of one or more reports."""

    __test__ = False

    summary: RunSummary
    cases: list[TestCaseResult]
    errors: list[FileError] = Field(default_factory=list)


class FileCoverage(_Model):
    """Line coverage of one source file."""

    path: str
    executable_lines: int
    covered_lines: int
    uncovered_lines: list[int] = Field(default_factory=list)
    branches: int | None = Field(None, description="Branches, where the tool measures them")
    covered_branches: int | None = None
    partial_lines: list[int] = Field(
        default_factory=list, description="Executed lines with a branch never taken"
    )
    executed_lines: list[int] | None = Field(
        None,
        description="The executable lines that ran (None: not recorded); with "
        "uncovered_lines, every line the tool measured",
        exclude_if=_unrecorded,
    )

    @property
    def ratio(self) -> float:
        """Covered / executable; a file with no executable line counts as fully covered."""
        if self.executable_lines == 0:
            return 1.0
        return self.covered_lines / self.executable_lines

    def lines_run(self, lines: Collection[int]) -> tuple[int, int]:
        """Of `lines`, how many ran and how many the tool measured (the others are blank,
        comments, declarations no tool counts). Without a record of the lines that ran,
        every line of `lines` counts as measured and ran unless it is uncovered."""
        wanted, missed = set(lines), set(self.uncovered_lines)
        if self.executed_lines is None:
            return len(wanted - missed), len(wanted)
        ran = wanted & set(self.executed_lines)
        return len(ran - missed), len(ran | (wanted & missed))


class SourceFile(_Model):
    path: str
    kind: SourceKind
    toolchain: ToolchainName


class MappedFile(_Model):
    """A source file, the specs that cover it, and where a new spec would go."""

    source: str
    kind: SourceKind
    specs: list[str] = Field(default_factory=list)
    expected_spec: str


class Mapping(_Model):
    toolchain: ToolchainName
    files: list[MappedFile]
    untested: list[str]
    warnings: list[str] = Field(
        default_factory=list, description="Test files the framework would not run, and why"
    )


class CommandResult(_Model):
    """What one command run (in a sandbox or not) produced."""

    argv: list[str]
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    #: Why the run was stopped or refused, in words (timeout, memory limit, ...), else None.
    reason: str | None = None
    backend: Literal["bwrap", "docker", "none"] = "none"
    cached: bool = False


class LintOffense(_Model):
    path: str
    line: int
    column: int = 0
    rule: str
    message: str
    correctable: bool = False


class SuiteProblem(_Model):
    """Why a test run never got to its tests (see tasks/toolchains/diagnose.py)."""

    tool: str = Field(description="The tool that failed: pytest, rspec, bundler, python, ...")
    cause: Literal["project", "environment"] = Field(
        description="project: the project's code or specs do not load (repairable); "
        "environment: tooling, options, missing plugins or gems (a person fixes it)"
    )
    message: str = Field(description="The real cause, one line")
    hint: str | None = None
    error_type: str | None = None
    file: str | None = Field(None, description="Repository file the error points at")
    line: int | None = None
    detail: str = Field("", description="The output's head and tail, secrets redacted")

    def one_line(self) -> str:
        """``<tool>: <message> (<hint>)``."""
        text = f"{self.tool}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class ValidationResult(_Model):
    """A spec or test file run with coverage and lint, as the gates see it."""

    toolchain: ToolchainName
    target: str | None = Field(None, description="The source file under test, repo-relative")
    specs: list[str] = Field(default_factory=list)
    loaded: bool = Field(description="False when the spec could not even be loaded")
    load_error: str | None = None
    examples: list[TestCaseResult] = Field(default_factory=list)
    coverage: FileCoverage | None = None
    lint: list[LintOffense] = Field(default_factory=list)
    duration_s: float = 0.0
    reason: str | None = Field(None, description="Sandbox reason: timeout, limit, network, ...")
    problem: SuiteProblem | None = Field(
        None, description="When not loaded: what stopped the run, and whose problem it is"
    )

    @property
    def passed(self) -> bool:
        """Loaded, at least one example, and no example failed or errored."""
        return (
            self.loaded
            and self.reason is None
            and bool(self.examples)
            and all(e.status in ("passed", "skipped") for e in self.examples)
            and any(e.status == "passed" for e in self.examples)
        )


class Finding(_Model):
    """One static-rubric finding."""

    path: str
    line: int
    rule: str
    message: str


class StaticVerdict(_Model):
    score: float = Field(ge=0, le=1)
    findings: list[Finding] = Field(default_factory=list)


class Exchange(BaseModel):
    """One model call as archived: the rendered prompt and every reply text (re-asks included).

    `cached`: the reply came from the reply cache, no call was made."""

    iteration: int
    prompt_name: str
    prompt_version: str
    prompt_sha256: str
    messages: list[dict[str, str]]
    replies: list[str] = Field(default_factory=list)
    tokens: int = 0
    error: str | None = None
    cached: bool = False
