"""Judging a spec end to end: run it in the sandbox first, then the static rubric and the LLM.

Used by `autopilot judge` and its `--calibrate` mode. A spec that does not pass is never sent
to the judge model: its score is 0.
"""

from __future__ import annotations

import logging
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from judge.calibration import CalibrationCase, load_cases
from judge.llm import LLMVerdict, combined_score, judge_with_model
from judge.static import check_spec
from tasks.core.config import Settings
from tasks.core.errors import BadInputError
from tasks.core.secrets import is_secret_path, read_for_prompt
from tasks.core.types import StaticVerdict, ValidationResult
from tasks.keep.git import resolve_commit, subdir_in_repo, worktree
from tasks.sandbox.make import make_runner
from tasks.toolchains import registry
from tasks.toolchains.base import Toolchain
from tasks.toolchains.mapping import map_repo
from tasks.toolchains.registry import detect_toolchain, toolchain_for

if TYPE_CHECKING:
    from tasks.model.client import ModelClient

log = logging.getLogger(__name__)


class JudgeScores(BaseModel):
    """What the LLM judge said, as ``autopilot judge --json`` shows it."""

    score: float
    samples: list[float]
    spread: float
    reasons: list[str]
    missing: list[str]

    @classmethod
    def of(cls, verdict: LLMVerdict) -> JudgeScores:
        return cls.model_validate(verdict.model_dump(include=set(cls.model_fields)))


class JudgeReport(BaseModel):
    """The `autopilot judge --json` document."""

    spec: str
    source: str
    validation: ValidationResult
    passed: bool
    static: StaticVerdict | None
    llm: JudgeScores | None
    score: float = Field(ge=0, le=1)


def model_client(settings: Settings) -> ModelClient | None:
    """The judge's model client, or None when no model is configured (the static rubric then
    scores alone). Every prompt is validated first: a broken one fails here, before any run."""
    if not settings.model_configured:
        return None
    from tasks.model.client import ModelClient
    from tasks.model.prompts import validate_all

    validate_all()
    return ModelClient.from_settings(settings)


def _relative(project: Path, given: str, what: str) -> str:
    """`given` (absolute, relative to the cwd, or relative to the project) as project-relative."""
    p = Path(given)
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, project / p]
    for c in candidates:
        if c.is_file():
            try:
                rel = c.resolve().relative_to(project.resolve()).as_posix()
            except ValueError:
                raise BadInputError(f"{given}: {what} is outside the repository") from None
            if is_secret_path(rel):
                raise BadInputError(f"{given}: refusing a secret file as {what}")
            return rel
    raise BadInputError(f"{given}: {what} not found")


def _source_for(project: Path, spec: str, toolchain: str) -> str:
    for f in map_repo(project, toolchain).files:
        if spec in f.specs or spec == f.expected_spec:
            return f.source
    raise BadInputError(f"{spec}: no source file maps to this spec; pass --source")


def judge_in_repo(
    repo: Path,
    spec: str,
    source: str | None,
    settings: Settings,
    client: ModelClient | None,
) -> JudgeReport:
    """Run `spec` in a sandboxed worktree of `repo` at HEAD, then judge it if it passed.

    The spec and the source are taken from the user's working tree (they may be uncommitted) and
    copied into the worktree; everything else is as committed at HEAD.

    Raises:
        BadInputError: the repository, spec or source cannot be used.
    """
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    toolchain = detect_toolchain(repo, settings.toolchain)
    chain = toolchain_for(settings, toolchain)
    spec_rel = _relative(repo, spec, "spec")
    source_rel = (
        _relative(repo, source, "source") if source else _source_for(repo, spec_rel, toolchain)
    )
    spec_text = read_for_prompt(repo, spec_rel)
    source_text = read_for_prompt(repo, source_rel)
    root, sub = subdir_in_repo(repo)
    with worktree(root, resolve_commit(root, "HEAD")) as wt:
        project = wt / sub if sub else wt
        for rel in (spec_rel, source_rel):
            dest = project / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / rel, dest)
        runner = make_runner(settings.sandbox, root=wt, toolchain_dirs=chain.sandbox_dirs(project))
        validation = chain.run_specs(project, [spec_rel], source_rel, runner)
    return _verdict(
        validation, spec_rel, spec_text, source_rel, source_text, chain, settings, client
    )


def _verdict(
    validation: ValidationResult,
    spec: str,
    spec_text: str,
    source: str,
    source_text: str,
    chain: Toolchain,
    settings: Settings,
    client: ModelClient | None,
) -> JudgeReport:
    passed = validation.passed
    static = check_spec(spec, spec_text, chain) if passed else None
    llm = None
    if passed and client is not None:
        llm = judge_with_model(
            client,
            proof=validation,
            spec_path=spec,
            spec_text=spec_text,
            source_path=source,
            source_text=source_text,
            language=chain.language,
            samples=settings.model.judge_samples,
        )
    if validation.coverage is not None:  # the document's contract: counts, not every line
        coverage = validation.coverage.model_copy(update={"executed_lines": None})
        validation = validation.model_copy(update={"coverage": coverage})
    return JudgeReport(
        spec=spec,
        source=source,
        validation=validation,
        passed=passed,
        static=static,
        llm=JudgeScores.of(llm) if llm is not None else None,
        score=combined_score(static, llm, passed),
    )


class CalibrationRow(BaseModel):
    id: str
    language: str
    label: float
    passed: bool
    static_score: float | None
    llm_score: float | None
    spread: float | None
    score: float
    agrees: bool = Field(description="Score within one rubric level (0.2) of the label")


class CalibrationReport(BaseModel):
    rows: list[CalibrationRow]
    agreement: float = Field(description="Share of cases within one level of their label")
    exact: float = Field(description="Share of cases exactly on their label")
    mean_abs_error: float
    mean_spread: float | None


def calibrate(
    settings: Settings, client: ModelClient | None, cases_dir: Path | None = None
) -> CalibrationReport:
    """Run every labelled case for real (sandboxed), judge it, and compare with its label."""
    rows = []
    for case in load_cases(cases_dir):
        report = _judge_case(case, settings, client)
        llm = report.llm
        rows.append(
            CalibrationRow(
                id=case.id,
                language=case.language,
                label=case.label,
                passed=report.passed,
                static_score=report.static.score if report.static else None,
                llm_score=llm.score if llm else None,
                spread=llm.spread if llm else None,
                score=report.score,
                agrees=abs(report.score - case.label) <= 0.2 + 1e-9,
            )
        )
    n = len(rows) or 1
    spreads = [r.spread for r in rows if r.spread is not None]
    return CalibrationReport(
        rows=rows,
        agreement=round(sum(r.agrees for r in rows) / n, 4),
        exact=round(sum(abs(r.score - r.label) < 1e-9 for r in rows) / n, 4),
        mean_abs_error=round(sum(abs(r.score - r.label) for r in rows) / n, 4),
        mean_spread=round(statistics.mean(spreads), 4) if spreads else None,
    )


def _judge_case(
    case: CalibrationCase, settings: Settings, client: ModelClient | None
) -> JudgeReport:
    chain = registry.by_language(case.language)()  # its own cases: the default toolchain
    with tempfile.TemporaryDirectory(prefix="autopilot-calibrate-") as tmp:
        root = Path(tmp)
        files = {case.source_path: case.source, case.spec_path: case.spec, **case.extra_sources}
        for rel, text in files.items():
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
        runner = make_runner(settings.sandbox, root=root, toolchain_dirs=chain.sandbox_dirs(root))
        validation = chain.run_specs(root, [case.spec_path], case.source_path, runner)
    return _verdict(
        validation, case.spec_path, case.spec, case.source_path, case.source, chain, settings,
        client,
    )  # fmt: skip
