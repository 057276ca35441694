"""What the flows accept: their settings from the options, and the checks that turn bad input
into one clear line (exit 2) before a flow starts. No Prefect here: a command with a bad option
fails at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from tasks.ci_inputs import ensure_ref, merge_base
from tasks.core.config import Settings, load_settings
from tasks.core.errors import BadInputError, ConfigError
from tasks.forge import pr_number_from_env
from tasks.generate.targets import check_globs
from tasks.keep.archive import open_archive
from tasks.keep.git import resolve_commit, subdir_in_repo
from tasks.keep.git_safe import GitError
from tasks.repair.scout import check_reports, no_usable_report
from tasks.toolchains.registry import detect_toolchain


def nightly_settings(repo: Path, min_coverage: float | None, min_judge: float | None) -> Settings:
    """The run's settings: environment over autopilot.toml, the CLI thresholds over both."""
    return load_settings(repo, {"gates.min_coverage": min_coverage, "gates.min_judge": min_judge})


def check_nightly(
    repo: Path,
    ref: str,
    only: list[str] | None,
    max_files: int | None,
    max_iterations: int,
    min_coverage: float | None,
    min_judge: float | None,
    archive: str | None,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
) -> None:
    """Raise BadInputError/ConfigError for what would make the flow fail at once."""
    from tasks.keep.git import resolve_commit, subdir_in_repo

    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    if max_files is not None and max_files < 0:
        raise BadInputError(f"--max-files: {max_files} is negative")
    if file_time_limit_s is not None and file_time_limit_s <= 0:
        raise BadInputError(f"file time limit: {file_time_limit_s} s is not positive")
    if max_model_calls is not None and max_model_calls < 0:
        raise BadInputError(f"--max-model-calls: {max_model_calls} is negative")
    if max_iterations < 1:
        raise BadInputError(f"--max-iterations: {max_iterations} is less than 1")
    check_globs(only)
    settings = nightly_settings(repo, min_coverage, min_judge)
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, ref)
    detect_toolchain(repo, settings.toolchain)
    open_archive(archive or settings.archive_uri)


def repair_settings(
    repo: Path, max_retries: int | None, human_timeout: float | None, archive: str | None = None
) -> Settings:
    """The run's settings: environment over autopilot.toml, the CLI options over both."""
    overrides = {
        "repair.max_retries": max_retries,
        "repair.human_timeout_s": human_timeout,
        "archive": archive,
    }
    return load_settings(repo, overrides)


def check_repair(
    repo: Path,
    reports: list[str],
    ref: str,
    max_retries: int | None,
    human_timeout: float | None,
) -> list[str]:
    """The reports (paths or ``s3://`` URIs) that cannot be used, one line each: a missing,
    unreadable or broken file, a malformed URI, a raw log without a model to read it. The run
    goes on with the others; an ``s3://`` object is only fetched by the flow. No model is
    needed: without one the repair reproduces, groups and reports.

    Raises:
        BadInputError/ConfigError: what would make the flow fail at once (the repository, the
            ref, the options), or reports were given and none can be used (one line naming
            each).
    """
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    settings = repair_settings(repo, max_retries, human_timeout)
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, ref)
    detect_toolchain(repo, settings.toolchain)
    uris = [r for r in reports if r.startswith("s3://")]
    local = [Path(r) for r in reports if not r.startswith("s3://")]
    bad = report_uri_problems(uris) + check_reports(local, repo, settings.model_configured)
    if reports and len(bad) == len(reports):
        raise BadInputError(no_usable_report(bad))
    return bad


def check_eval(repo: Path, regressions: int, only: list[str] | None) -> None:
    """Raise BadInputError/ConfigError for what would make the evaluation fail at once."""
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    if regressions < 0:
        raise BadInputError(f"--regressions: {regressions} is negative")
    check_globs(only)
    settings = load_settings(repo)
    if not settings.model_configured:
        raise ConfigError("eval needs a model: set MISTRAL_API_KEY or AUTOPILOT_MODEL_URL")
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, "HEAD")
    detect_toolchain(repo, settings.toolchain)


def report_uri_problems(uris: list[str]) -> list[str]:
    """One line per ``s3://`` report URI that names no bucket."""
    from tasks.ci_inputs.reports import split_s3

    bad: list[str] = []
    for uri in uris:
        try:
            split_s3(uri)
        except ValueError as exc:
            bad.append(f"{uri}: {exc}")
    return bad


def premerge_settings(repo: Path, min_diff_coverage: float | None = None) -> Settings:
    """The run's settings: environment over autopilot.toml, the CLI threshold over both."""
    return load_settings(repo, {"gates.min_diff_coverage": min_diff_coverage})


def premerge_pr_number(option: int | None) -> int | None:
    """The pull request to comment on: the option, else the one the CI environment names."""
    return option if option is not None else pr_number_from_env(os.environ)


def check_premerge(
    repo: Path,
    base: str,
    head: str,
    *,
    pr_number: int | None = None,
    max_iterations: int = 1,
    min_diff_coverage: float | None = None,
    archive: str | None = None,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
) -> None:
    """Raise BadInputError/ConfigError for what would make the pre-merge fail at once. A base
    or head the clone lacks is fetched from ``origin`` here (and a shallow clone deepened for
    their merge base): one that cannot be had is bad input."""
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    if pr_number is not None and pr_number < 1:
        raise BadInputError(f"--pr-number: {pr_number} is not a pull request number")
    if max_iterations < 1:
        raise BadInputError(f"--max-iterations: {max_iterations} is less than 1")
    if max_model_calls is not None and max_model_calls < 0:
        raise BadInputError(f"--max-model-calls: {max_model_calls} is negative")
    if file_time_limit_s is not None and file_time_limit_s <= 0:
        raise BadInputError(f"file time limit: {file_time_limit_s} s is not positive")
    settings = premerge_settings(repo, min_diff_coverage)
    root, _ = subdir_in_repo(repo)
    try:
        head_sha = ensure_ref(root, head).sha
        base_sha = ensure_ref(root, base).sha
        merge_base(root, base_sha, head_sha)
    except GitError as exc:
        raise BadInputError(str(exc)) from None
    detect_toolchain(repo, settings.toolchain)
    open_archive(archive or settings.archive_uri)
