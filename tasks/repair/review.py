"""The auditor: static checks, risk, and a sandbox re-run of a patch. Verdict in AuditResult.

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
import os
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError

from tasks.core.config import Settings
from tasks.core.types import TestCaseResult, ValidationResult
from tasks.keep.git import worktree
from tasks.keep.git_safe import run_git
from tasks.model.prompts import format_failure_output
from tasks.model.schemas import Diagnosis
from tasks.repair.patch import (
    apply_args,
    apply_to_worktree,
    git_view,
    patch_bytes,
    symlinks_in_base,
)
from tasks.repair.risk import parse_patch, risk_reasons
from tasks.repair.scout import error_type_of, is_test_path
from tasks.repair.state import AuditResult, FailureGroup
from tasks.sandbox.cache import cache_key
from tasks.sandbox.runners import make_runner
from tasks.toolchains.base import CommandRunner
from tasks.toolchains.mapping import map_repo
from tasks.toolchains.registry import get_toolchain

log = logging.getLogger(__name__)


def git_apply(root: Path, sub: str, diff: str, *, check: bool, reverse: bool = False) -> str | None:
    """`git apply [--check] [--reverse]` of `diff` at the worktree `root` (index and files),
    paths under `sub`, through the hardened git of :mod:`tasks.keep.git_safe`.

    Returns:
        None when it applies (or applied), else git's message.
    """
    args = apply_args(sub, cached=False, reverse=reverse, check=check)
    done = run_git(args, cwd=root, input=patch_bytes(diff), check=False, timeout=60)
    if done.returncode != 0:
        text = (done.stderr or done.stdout).decode("utf-8", errors="replace").strip()
        return text or f"git apply exited {done.returncode}"
    return None


def syntax_errors(project: Path, files: list[str], runner: CommandRunner) -> list[str]:
    """`ruby -c` / Python's parser on the changed files that exist; one line per broken file."""
    errors: list[str] = []
    for path in files:
        if not (project / path).is_file():
            continue
        if path.endswith((".rb", ".rake")) or path.rsplit("/", 1)[-1] in ("Gemfile", "Rakefile"):
            argv = ["ruby", "-c", path]
        elif path.endswith(".py"):
            # ast.parse, not py_compile: nothing is written into the worktree.
            code = "import ast,sys; ast.parse(open(sys.argv[1],'rb').read(), sys.argv[1])"
            argv = [sys.executable, "-c", code, path]
        else:
            continue
        result = runner.run(argv, cwd=project, timeout_s=60)
        if result.exit_code != 0:
            text = (result.stderr or result.stdout).strip().splitlines()
            errors.append(f"{path}: syntax error: {' '.join(text[-3:])[:500]}")
    return errors


def _cache_path(home: Path, key: str) -> Path:
    return home / "cache" / "repair" / f"{key}.json"


def _cached_validation(home: Path, key: str) -> ValidationResult | None:
    try:
        return ValidationResult.model_validate_json(_cache_path(home, key).read_text("utf-8"))
    except (OSError, ValidationError):
        return None


def _store_validation(home: Path, key: str, result: ValidationResult) -> None:
    path = _cache_path(home, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(result.model_dump_json())
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("%s: could not store the validation: %s", path, exc)


def rerun_specs(project: Path, toolchain: str, group: FailureGroup, files: list[str]) -> list[str]:
    """The failing examples' files plus the specs mapped to changed sources (the neighbours)."""
    specs = dict.fromkeys(group.spec_files)
    changed_sources = {f for f in files if not is_test_path(f)}
    changed_specs = [f for f in files if is_test_path(f) and (project / f).is_file()]
    if changed_sources:
        mapping = map_repo(project, toolchain)
        for mapped in mapping.files:
            if mapped.source in changed_sources:
                specs.update(dict.fromkeys(mapped.specs))
    for spec in changed_specs:
        name = spec.rsplit("/", 1)[-1]
        if name.endswith("_spec.rb") or (name.startswith("test_") and name.endswith(".py")):
            specs.setdefault(spec, None)
    return [s for s in specs if (project / s).is_file()]


def _same(a: TestCaseResult, b: TestCaseResult) -> bool:
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
    still = [e for e in failing if any(_same(e, t) for t in group.tests)]
    missing = [t for t in group.tests if not any(_same(e, t) for e in result.examples)]
    broken = [
        e
        for e in failing
        if not any(_same(e, t) for t in group.tests)
        and not any(_same(e, k) for k in known_failures)
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
        orig = next(t for t in group.tests if _same(e, t))
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


def audit_patch(
    *,
    repo_root: Path,
    sub: str,
    base_commit: str,
    toolchain: str,
    patch: str,
    group: FailureGroup,
    diagnosis: Diagnosis | None,
    known_failures: list[TestCaseResult],
    settings: Settings,
) -> AuditResult:
    """Audit one patch: static checks, risk, then the sandbox re-run; see the module docstring.

    Raises:
        SandboxError, GitError, ToolchainError: a tool failed (the flow hands the group over).
    """
    first = parse_patch(patch)
    base = AuditResult(
        verdict="NEEDS_REVISION", changed_files=first.files, changed_lines=first.changed_lines
    )
    if first.problems:
        base.static_errors = first.problems
        base.feedback = "Patch refused: " + "; ".join(first.problems)
        return base
    links = symlinks_in_base(repo_root, sub, base_commit, first.files)
    if links:
        base.static_errors = [f"{p}: is a symbolic link" for p in links]
        base.feedback = "Patch refused: " + "; ".join(base.static_errors)
        return base
    view = git_view(repo_root, sub, base_commit, patch)
    if isinstance(view, str):
        base.static_errors = [f"git apply: {view}"]
        base.feedback = f"The patch does not apply to the original code: {view}"
        return base
    info = view.info
    # From here on, the paths and counts are git's, not the headers'.
    base.changed_files, base.changed_lines, base.tree = info.files, info.changed_lines, view.tree
    if info.problems:
        base.static_errors = info.problems
        base.feedback = "Patch refused: " + "; ".join(info.problems)
        return base
    with worktree(repo_root, base_commit) as wt:
        project = wt / sub if sub else wt
        links = [p for p in info.files if (project / p).is_symlink()]
        if links:
            base.static_errors = [f"{p}: is a symbolic link" for p in links]
            base.feedback = "Patch refused: " + "; ".join(base.static_errors)
            return base
        base.risks = risk_reasons(info, diagnosis, group, settings.repair)
        error = apply_to_worktree(wt, sub, patch, view.tree)
        if error:
            base.static_errors = [f"git apply: {error}"]
            base.feedback = f"The patch does not apply to the original code: {error}"
            return base
        runner = make_runner(settings.sandbox, root=wt)
        base.static_errors = syntax_errors(project, info.files, runner)
        if base.static_errors:
            base.feedback = "The patched files do not parse: " + "; ".join(base.static_errors)
            return base
        specs = rerun_specs(project, toolchain, group, info.files)
        base.rerun_specs = specs
        digest = hashlib.sha256(patch.encode()).hexdigest()
        extra = json.dumps([toolchain, sub, settings.python, "v1"])
        key = cache_key(base_commit, digest, specs, extra=extra)
        result = _cached_validation(settings.home, key)
        if result is None:
            result = get_toolchain(toolchain, settings.python).run_specs(
                project, specs, None, runner
            )
            if result.reason is None:  # a timeout may be transient: never cache it
                _store_validation(settings.home, key, result)
        else:
            base.cached = True
    base.rerun_output = format_failure_output(result) or (
        f"{len(result.examples)} examples ran, all passed"
    )
    passed, feedback, wrong = judge_rerun(group, result, known_failures)
    base.diagnosis_wrong = wrong
    if not passed:
        base.feedback = feedback
        return base
    if base.risks:
        base.verdict = "RISKY"
        base.feedback = "Tests pass, but the patch needs a person: " + "; ".join(base.risks)
        return base
    base.verdict = "PASSED"
    return base
