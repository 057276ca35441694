"""The patch review (the repair's auditor): static checks, risk, and a sandbox re-run of a
patch; the verdict is a :class:`~tasks.repair.state.PatchReview`.

The patch is judged by what git will write (:mod:`tasks.repair.patch`: applied to a scratch
index at the base commit, read back with ``git diff-tree``), never by its headers alone. Static:
the diff's text passes the first filter of :mod:`tasks.repair.risk`, git applies it, and what git
wrote holds no symlink, submodule or binary and stays in the project; no symlink in the worktree
on a patched path; a syntax check of the changed files (``ruby -c``, Python's parser) in the
sandbox. Risk: :func:`tasks.repair.risk.risk_reasons` on git's paths. Then a fresh worktree at
the base commit gets the patch (checked to hold exactly the audited tree) and the failing
examples' files plus the specs mapped to changed sources are re-run. The audited tree is kept in
the verdict, so the commit can be checked against it. An identical (commit, patch, specs) reuses
its earlier result (level 1 of the two-level cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

from tasks.core.config import Settings
from tasks.core.json_store import JsonStore
from tasks.core.types import TestCaseResult, ValidationResult
from tasks.keep.git import worktree
from tasks.model.feedback import format_failure_output
from tasks.model.replies import Diagnosis
from tasks.repair.patch import GitView, apply_to_worktree, git_view, symlinks_in_base
from tasks.repair.risk import parse_patch, risk_reasons
from tasks.repair.scout import error_type_of
from tasks.repair.state import FailureGroup, PatchReview
from tasks.sandbox.cache import cache_key
from tasks.sandbox.make import make_runner
from tasks.toolchains import registry
from tasks.toolchains.base import CommandRunner, Toolchain
from tasks.toolchains.files import FileRules
from tasks.toolchains.mapping import map_repo

log = logging.getLogger(__name__)


def syntax_errors(project: Path, files: list[str], runner: CommandRunner) -> list[str]:
    """The syntax check of every changed file that exists (the check of the first toolchain
    whose language the file is: ``ruby -c``, Python's parser), one line per broken file."""
    errors: list[str] = []
    for path in files:
        argv = registry.syntax_check(path) if (project / path).is_file() else None
        if argv is None:
            continue
        result = runner.run(argv, cwd=project, timeout_s=60)
        if result.exit_code != 0:
            text = (result.stderr or result.stdout).strip().splitlines()
            errors.append(f"{path}: syntax error: {' '.join(text[-3:])[:500]}")
    return errors


def rerun_specs(
    project: Path, toolchain: str, rules: FileRules, group: FailureGroup, files: list[str]
) -> list[str]:
    """The failing examples' files plus the specs mapped to changed sources (the neighbours)
    and the changed test files themselves."""
    specs = dict.fromkeys(group.spec_files)
    changed_sources = {f for f in files if not rules.is_test_side(f)}
    if changed_sources:
        mapping = map_repo(project, toolchain)
        for mapped in mapping.files:
            if mapped.source in changed_sources:
                specs.update(dict.fromkeys(mapped.specs))
    for spec in files:
        if rules.is_test_file(spec) and (project / spec).is_file():
            specs.setdefault(spec, None)
    return [s for s in specs if (project / s).is_file()]


def same_case(a: TestCaseResult, b: TestCaseResult) -> bool:
    """One example seen by two reporters (ids differ between JUnit and RSpec JSON, e.g.)."""
    if a.id == b.id:
        return True
    if a.file is None or a.file != b.file:
        return False
    if _file_level(a) or _file_level(b):
        return True
    return a.name == b.name or (a.line is not None and a.line == b.line)


def _file_level(case: TestCaseResult) -> bool:
    """A failure of a whole test file (it did not load): every example of the file stands in."""
    return case.line is None and case.file is not None and case.id == case.file


def judge_rerun(
    group: FailureGroup, result: ValidationResult, known_failures: list[TestCaseResult]
) -> tuple[bool, str, bool]:
    """(passed, feedback, diagnosis_wrong) from the re-run of a patched worktree."""
    if not result.loaded or result.reason:
        why = result.load_error or result.reason or "the specs did not load"
        return False, f"After the patch the tests could not run: {why}", False
    failing = [e for e in result.examples if e.status in ("failed", "error")]
    still = [e for e in failing if any(same_case(e, t) for t in group.tests)]
    missing = [t for t in group.tests if not any(same_case(e, t) for e in result.examples)]
    broken = [
        e
        for e in failing
        if not any(same_case(e, t) for t in group.tests)
        and not any(same_case(e, k) for k in known_failures)
    ]
    problems: list[str] = []
    if still:
        problems.append(f"{len(still)} of {len(group.tests)} failing examples still fail")
    if missing:
        problems.append("examples no longer run: " + ", ".join(t.id for t in missing[:5]))
    if broken:
        problems.append("the patch breaks passing examples: " + ", ".join(e.id for e in broken))
    if not problems:
        return True, "", False
    unchanged = bool(still) and len(still) == len(group.tests) and not broken
    for e in still:
        orig = next(t for t in group.tests if same_case(e, t))
        if (error_type_of(e), (e.message or "").strip()) != (
            error_type_of(orig),
            (orig.message or "").strip(),
        ):
            unchanged = False
    feedback = "; ".join(problems)
    if unchanged:
        feedback += (
            ". The failures are exactly as before the patch: the diagnosis looks wrong, "
            "the cause is elsewhere"
        )
    return False, feedback, unchanged


def fixed_tests(group: FailureGroup, result: ValidationResult) -> list[str]:
    """The group's failing examples that ran and passed in `result` (a run that did not load
    fixed none)."""
    if not result.loaded or result.reason:
        return []
    return [
        t.id
        for t in group.tests
        if (seen := [e for e in result.examples if same_case(e, t)])
        and all(e.status in ("passed", "skipped") for e in seen)
    ]


def review_patch(
    *,
    repo_root: Path,
    sub: str,
    base_commit: str,
    chain: Toolchain,
    patch: str,
    group: FailureGroup,
    diagnosis: Diagnosis | None,
    known_failures: list[TestCaseResult],
    settings: Settings,
) -> PatchReview:
    """Review one patch: static checks, risk, then the sandbox re-run; see the module docstring.

    Raises:
        SandboxError, GitError, ToolchainError: a tool failed (the flow hands the group over).
    """
    review, view = _static_review(repo_root, sub, base_commit, patch)
    if view is None:
        return review
    info = view.info
    with worktree(repo_root, base_commit) as wt:
        project = wt / sub if sub else wt
        rules = chain.file_rules(project)
        links = [p for p in info.files if (project / p).is_symlink()]
        if links:
            return _refused(review, [f"{p}: is a symbolic link" for p in links])
        review.risks = risk_reasons(info, diagnosis, group, settings.repair, chain, rules)
        error = apply_to_worktree(wt, sub, patch, view.tree)
        if error:
            review.static_errors = [f"git apply: {error}"]
            review.feedback = f"The patch does not apply to the original code: {error}"
            return review
        runner = make_runner(settings.sandbox, root=wt, toolchain_dirs=chain.sandbox_dirs(project))
        review.static_errors = syntax_errors(project, info.files, runner)
        if review.static_errors:
            review.feedback = "The patched files do not parse: " + "; ".join(review.static_errors)
            return review
        review.rerun_specs = rerun_specs(project, chain.name, rules, group, info.files)
        runs = settings.gates.flaky_runs
        change = (base_commit, sub, patch)
        result, store = _rerun(project, chain, runner, review, change, runs, settings.cache_root)
        note = ""
        if store is not None and judge_rerun(group, result, known_failures)[0]:
            again, note = _again(project, chain, runner, review, group, known_failures, runs)
            result = again or result
        if store is not None and result.reason is None:  # a timeout may be transient
            store(result)
    review = _verdict(review, result, group, known_failures)
    if note:
        review.feedback = f"{note}: {review.feedback}"
    return review


def _again(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    review: PatchReview,
    group: FailureGroup,
    known_failures: list[TestCaseResult],
    runs: int,
) -> tuple[ValidationResult | None, str]:
    """A passing re-run repeated `runs` times (``flaky_runs``, no coverage): the first run that
    does not pass and why, or (None, "") when every run passed."""
    for number in range(1, runs + 1):
        result = chain.run_specs(project, review.rerun_specs, None, runner, coverage=False)
        if not judge_rerun(group, result, known_failures)[0]:
            return (
                result,
                f"Flaky after the patch: passed once, then failed on re-run {number} of {runs}",
            )
    return None, ""


def _static_review(
    repo_root: Path, sub: str, base_commit: str, patch: str
) -> tuple[PatchReview, GitView | None]:
    """The checks before anything runs: the diff's text, symbolic links at the base, what git
    writes for it. Returns the review so far and git's view (None: refused)."""
    first = parse_patch(patch)
    review = PatchReview(
        verdict="NEEDS_REVISION", changed_files=first.files, changed_lines=first.changed_lines
    )
    if first.problems:
        return _refused(review, first.problems), None
    links = symlinks_in_base(repo_root, sub, base_commit, first.files)
    if links:
        return _refused(review, [f"{p}: is a symbolic link" for p in links]), None
    view = git_view(repo_root, sub, base_commit, patch)
    if isinstance(view, str):
        review.static_errors = [f"git apply: {view}"]
        review.feedback = f"The patch does not apply to the original code: {view}"
        return review, None
    info = view.info
    # From here on, the paths and counts are git's, not the headers'.
    review.changed_files, review.changed_lines, review.tree = (
        info.files,
        info.changed_lines,
        view.tree,
    )
    if info.problems:
        return _refused(review, info.problems), None
    return review, view


def _refused(review: PatchReview, problems: list[str]) -> PatchReview:
    review.static_errors = list(problems)
    review.feedback = "Patch refused: " + "; ".join(problems)
    return review


def _rerun(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    review: PatchReview,
    change: tuple[str, str, str],
    runs: int,
    cache_root: Path,
) -> tuple[ValidationResult, Callable[[ValidationResult], object] | None]:
    """The re-run of the review's specs in the patched worktree, or its earlier result for an
    identical (commit, project, patch, specs, toolchain configuration, flaky runs): level 1 of
    the two-level cache. With a fresh result, how to store the final one: it is stored after
    the flaky re-runs, so a cached pass has survived them. `change` is (commit, sub, patch)."""
    base_commit, sub, patch = change
    digest = hashlib.sha256(patch.encode()).hexdigest()
    extra = json.dumps([chain.name, sub, chain.config_digest(project), runs, "v3"])
    key = cache_key(base_commit, digest, review.rerun_specs, extra=extra)
    store = JsonStore(cache_root / "repair", ValidationResult)
    result = store.get(key)
    if result is not None:
        review.cached = True
        return result, None
    return chain.run_specs(project, review.rerun_specs, None, runner), lambda r: store.put(key, r)


def _verdict(
    review: PatchReview,
    result: ValidationResult,
    group: FailureGroup,
    known_failures: list[TestCaseResult],
) -> PatchReview:
    review.rerun_output = format_failure_output(result) or (
        f"{len(result.examples)} examples ran, all passed"
    )
    passed, feedback, wrong = judge_rerun(group, result, known_failures)
    review.diagnosis_wrong = wrong
    review.fixed_tests = fixed_tests(group, result)
    if not passed:
        review.feedback = feedback
        return review
    if review.risks:
        review.verdict = "RISKY"
        review.feedback = "Tests pass, but the patch needs a person: " + "; ".join(review.risks)
        return review
    review.verdict = "PASSED"
    return review
