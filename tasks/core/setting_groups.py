"""The settings groups of models, gates, the sandbox and the repair (fields of
:class:`tasks.core.config.Settings`, which re-exports them), and the check of a declared
``[sandbox] read_only`` path."""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from tasks.core.host_paths import declared_reason
from tasks.core.settings_base import _Group

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Variables the sandbox sets itself: a host value would point outside the view.
_OWN_ENV = {"HOME", "TMPDIR", "PATH"}


def declared_path_problem(path: str, autopilot_home: str | None = None) -> str | None:
    """Why a `[sandbox] read_only` path cannot be declared, or None (see
    :func:`tasks.core.host_paths.declared_reason`; it must also exist)."""
    reason = declared_reason(path, autopilot_home=autopilot_home)
    if reason is None and not os.path.exists(path):
        reason = f"{path}: does not exist"
    return reason


class ModelNames(_Group):
    """One model per role."""

    generator: str = Field("codestral-latest", description="Writes and fixes tests")
    diagnostician: str = Field("mistral-large-latest", description="Diagnoses failures (JSON)")
    surgeon: str = Field("codestral-latest", description="Writes repair diffs")
    judge: str = Field("mistral-large-latest", description="Scores tests on the rubric (JSON)")
    scout: str | None = Field(
        None, description="Reads logs no parser understands; default: the diagnostician's"
    )


class ModelSettings(_Group):
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout")
    max_retries: int = Field(5, ge=0, description="Transport retries (429, 5xx, timeouts)")
    max_reasks: int = Field(2, ge=0, description="Re-asks when a reply breaks its format")
    max_concurrency: int = Field(8, ge=1, description="Model calls in flight at once")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of every call")
    max_tokens: int = Field(8192, gt=0, description="Most tokens one reply may have")
    judge_samples: int = Field(3, ge=1, description="LLM judge samples; the median counts")
    reuse_replies: bool = Field(
        True,
        description="Keep every model reply (under <cache>/replies, keyed by the exact request "
        "and its occurrence) before it is used, and answer the same request from there: a "
        "resumed or repeated run never pays twice for a reply",
    )
    shared_limit: str | None = Field(
        None,
        description="Prefect global concurrency limit every model call takes a slot of, across "
        "processes and machines (the nightly sets 'autopilot-model-calls' on a Dask cluster)",
    )
    api_key_secret: str | None = Field(
        None,
        description="A Prefect Secret block holding the Mistral API key, read by the flow and by "
        "every worker when MISTRAL_API_KEY is not set there (the key never travels with a job)",
    )


#: A static rule id (judge/static.py's RULES): lowercase words joined by hyphens.
RuleId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")]


class GateSettings(_Group):
    min_coverage: float = Field(0.9, ge=0, le=1, description="Target file line coverage")
    min_coverage_gain: float = Field(
        0.2, ge=0, le=1, description="Alternative: improvement over the baseline coverage"
    )
    min_judge: float = Field(0.7, ge=0, le=1, description="LLM judge score threshold")
    flaky_runs: int = Field(3, ge=0, description="Extra passing runs required")
    static_reject: list[RuleId] | None = Field(
        None,
        description="Static rule ids the static gate rejects (None: the 'Static gate' list of "
        "judge/rubric.md)",
    )
    min_mutation: float | None = Field(
        None, ge=0, le=1, description="Mutation score an accepted file must reach (None: off)"
    )
    max_mutants: int = Field(
        10, ge=0, description="Mutants scored per accepted file (0: no mutation score)"
    )
    min_diff_coverage: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Pre-merge: the share of a file's changed lines (those the coverage tool "
        "measures) its tests must run",
    )


class SandboxSettings(_Group):
    backend: Literal["auto", "bwrap", "docker", "none"] = Field(
        "auto", description="auto = bwrap when installed, else an error unless 'none' is chosen"
    )
    timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit per command")
    spec_timeout_s: float = Field(
        120.0, gt=0, description="Limit for one spec file run alone (finding a hanging spec)"
    )
    memory_mb: int = Field(4096, gt=0, description="Address-space limit per process")
    max_processes: int = Field(256, gt=0, description="Process limit inside the sandbox")
    max_parallel: int | None = Field(
        None,
        gt=0,
        description=(
            "Sandboxed commands running at once in one Autopilot process; the others wait "
            "(their timeout starts when they run). None: the CPUs the process may use; more "
            "than the cores only adds switching between them"
        ),
    )
    docker_image: str = Field(
        "test-autopilot-worker:latest", description="Image of the docker backend's runs"
    )
    read_only: list[str] = Field(
        default_factory=list,
        description="Host paths the project needs, shown read-only at the same place (absolute "
        "and existing; never /, /etc, /run, a home directory or a parent of it, a path that "
        "holds credentials (~/.ssh, ~/.netrc, ~/.docker...) or a Unix socket, or "
        "$AUTOPILOT_HOME)",
    )
    pass_env: list[str] = Field(
        default_factory=list,
        description="Host environment variables passed into the sandbox by name (nothing else "
        "of the host environment is); their values are redacted from what is kept",
    )

    @field_validator("read_only")
    @classmethod
    def _check_read_only(cls, paths: list[str]) -> list[str]:
        for path in paths:
            reason = declared_path_problem(path)
            if reason:
                raise ValueError(reason)
        return paths

    @field_validator("pass_env")
    @classmethod
    def _check_pass_env(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r}: not an environment variable name")
            if name in _OWN_ENV or name.startswith(("AUTOPILOT_", "MISTRAL_")):
                raise ValueError(f"{name}: set by Autopilot itself, never passed from the host")
        return names


class RepairSettings(_Group):
    max_retries: int = Field(3, ge=0, description="Surgeon revisions per failure group")
    min_confidence: float = Field(
        0.6, ge=0, le=1, description="Diagnoses less sure than this go to a person"
    )
    max_patch_lines: int = Field(60, gt=0, description="Larger patches go to a person")
    risky_paths: list[str] = Field(default_factory=list, description="Globs that need a human")
    human_timeout_s: float = Field(
        3600.0, ge=0, description="Seconds a hand-off waits for a person's answer"
    )


class PremergeSettings(_Group):
    """``autopilot premerge``: how much of a pull request's diff is worked on, and how it is
    reported on the forge."""

    max_changed_lines: int = Field(
        2000,
        gt=0,
        description="Changed lines worked on at most (the diff's budget): files past it are "
        "listed, not tested",
    )
    max_files: int = Field(20, gt=0, description="Changed source files worked on at most")
    skip: list[str] = Field(
        default_factory=list,
        description="Globs of further generated or vendored files to skip (lock files, "
        "minified files, vendored folders and files with a generated header are skipped "
        "anyway)",
    )
    status_context: str = Field(
        "autopilot/premerge",
        min_length=1,
        max_length=100,
        description="The name of the commit status on the pull request's head",
    )
