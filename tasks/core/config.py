"""Settings: `AUTOPILOT_*` environment variables over an optional repo `autopilot.toml`.

Nothing is read at import time; call :func:`load_settings`.
Nested groups use `__` in environment names, e.g. `AUTOPILOT_GATES__MIN_COVERAGE=0.8`.
The repository's file never widens the operator's security settings
(:mod:`tasks.core.operator_only`); the secrets the settings hold are registered for redaction
by value (:mod:`tasks.core.secret_values`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tasks.core.errors import ConfigError
from tasks.core.host_paths import declared_reason
from tasks.core.operator_only import IgnoredSetting, Screened, screen, warn
from tasks.core.run_settings import EnvSettings, ForgeSettings, HistorySettings, ServicesSettings
from tasks.core.secret_values import register_environment, register_model_secrets, register_secret
from tasks.core.settings_base import _Group

CONFIG_FILE = "autopilot.toml"
M = TypeVar("M", bound=BaseModel)
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


class Settings(_Group, BaseSettings):
    """Every setting, with its environment name `AUTOPILOT_<NAME>` (groups: `__`)."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOPILOT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    home: Path = Field(
        default_factory=lambda: Path.home() / ".autopilot",
        description="Local state: default archive, caches",
    )
    mistral_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("MISTRAL_API_KEY", "AUTOPILOT_MISTRAL_API_KEY"),
        description="Mistral API key",
    )
    model_url: str | None = Field(
        None, description="SDK server_url for a self-hosted Mistral-compatible server"
    )
    models: ModelNames = Field(default_factory=ModelNames)
    model: ModelSettings = Field(default_factory=ModelSettings)
    gates: GateSettings = Field(default_factory=GateSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    repair: RepairSettings = Field(default_factory=RepairSettings)
    toolchain: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9-]*$",
        description="Override toolchain detection: a registered toolchain's name "
        "(ruby-rspec, python-pytest, node-jest)",
    )
    archive: str | None = Field(None, description="Archive URI; default <home>/archive")
    cache_dir: Path | None = Field(
        None,
        description="Caches of nightly outcomes, repair replies and re-runs, mutants; default "
        "<home>/cache (`eval` uses a private one)",
    )
    python: str | None = Field(
        None,
        description="Interpreter that runs a Python project's tests (it needs pytest and "
        "coverage), e.g. the project's .venv/bin/python; relative to the repository; "
        "default: Autopilot's own",
    )
    envs: EnvSettings = Field(
        default_factory=EnvSettings,
        description="Prepared environments: the project's dependencies installed once per lock "
        "file and reused read-only (cache level 2)",
    )
    services: ServicesSettings = Field(
        default_factory=ServicesSettings,
        description="Throwaway servers per run (PostgreSQL, Redis) on a private socket",
    )
    forge: ForgeSettings = Field(
        default_factory=ForgeSettings,
        description="Where pull requests are opened (GitHub or GitLab); unset: never",
    )
    history: HistorySettings = Field(
        default_factory=HistorySettings,
        description="The run history store (memory across runs: flaky quarantine, skips, "
        "shard merge, trends)",
    )
    node_modules: str | None = Field(
        None,
        description="Your own node_modules for a JavaScript/TypeScript project's tests (its "
        "Jest, ts-jest, types and dependencies), relative to the repository, used instead of "
        "a prepared one and linked into the worktree; default: the tree's own, else the "
        "prepared environment of the project's npm lock, else the checkout's, else "
        "Autopilot's tools",
    )
    prepare: list[str] = Field(
        default_factory=list,
        description="Commands run once in each worktree before its tests (e.g. to generate "
        "files the project makes at install time and ignores in git); run in the sandbox, "
        "split like a shell would, without a shell",
    )
    #: The directory :func:`load_settings` read them for (see :attr:`loaded_from`).
    _loaded_from: Path | None = PrivateAttr(None)

    @property
    def loaded_from(self) -> Path | None:
        """The project directory these settings were loaded for (the user's checkout, or the
        project inside it), against which relative settings were resolved; None when loaded
        without one. The runs happen in worktrees, which lack what git ignores: a stack may
        look here for what the user installed (a project's ``node_modules``)."""
        return self._loaded_from

    @property
    def model_configured(self) -> bool:
        """A model is usable when a key or a self-hosted server URL is set."""
        return self.mistral_api_key is not None or self.model_url is not None

    @property
    def cache_root(self) -> Path:
        """Where the outcome, reply, re-run and mutant caches live."""
        return self.cache_dir or self.home / "cache"

    @property
    def archive_uri(self) -> str:
        return self.archive or str(self.home / "archive")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit arguments (the repo's autopilot.toml, CLI options) sit under the environment.
        # No dotenv source: a target repository's .env is never read.
        return env_settings, init_settings


def _read_toml(repo: Path) -> dict[str, Any]:
    path = repo / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    # Secrets never come from a file in the target repository: screen() drops them.
    return data.get("autopilot", data)


class LoadedSettings(NamedTuple):
    """The settings and what the repository's autopilot.toml gave: the part used under the
    environment, the operator's settings it narrowed (used over the environment) and the values
    that were ignored (operator-only)."""

    settings: Settings
    repo_data: dict[str, Any]
    narrowed: dict[str, Any]
    ignored: list[IgnoredSetting]


def load_settings(repo: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from the environment, over `repo/autopilot.toml`, over the defaults.

    A value of the file that only the operator may set (or widen) is ignored with one warning
    line; one that narrows an operator's setting (a lower limit, fewer paths) holds over the
    environment too (:mod:`tasks.core.operator_only`).

    Args:
        repo: the target repository whose autopilot.toml (if any) is read.
        overrides: values from CLI options by dotted name (`"gates.min_coverage"`); they win over
            everything. None values mean "not given" and are ignored.
    """
    return load_settings_report(repo, overrides).settings


def load_settings_report(
    repo: Path | None = None, overrides: dict[str, Any] | None = None
) -> LoadedSettings:
    """:func:`load_settings`, with what the repository's file gave and what was ignored."""
    raw = _read_toml(repo) if repo is not None else {}
    screened = Screened(raw, {}, [])
    try:
        if raw and repo is not None:
            operator = _with_overrides(Settings(), overrides)
            screened = screen(raw, operator, repo=repo, file=repo / CONFIG_FILE)
        # The repository's narrowing holds over the environment; a command's option over both.
        settings = _with_overrides(Settings(**screened.data), screened.narrowed)
        settings = _with_overrides(settings, overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"invalid setting {where}: {message}") from None
    warn(screened.ignored)
    if settings.python is not None and repo is not None:
        settings = settings.model_copy(update={"python": _interpreter(repo, settings.python)})
    if settings.node_modules is not None and repo is not None:
        settings = settings.model_copy(
            update={"node_modules": _directory(repo, "node_modules", settings.node_modules)}
        )
    for path in settings.sandbox.read_only:
        # Again against the configured home: it may come from an option, not the env.
        reason = declared_path_problem(path, autopilot_home=str(settings.home))
        if reason:
            raise ConfigError(f"invalid setting sandbox.read_only: {reason}")
    if repo is not None:
        settings._loaded_from = Path(os.path.abspath(repo))
    _register_secrets(settings)
    return LoadedSettings(settings, *screened)


def _with_overrides(settings: Settings, overrides: dict[str, Any] | None) -> Settings:
    for dotted, value in (overrides or {}).items():
        if value is not None:
            try:
                settings = _override(settings, dotted.split("."), value)
            except ValidationError as exc:
                message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
                raise ConfigError(f"invalid setting {dotted}: {message}") from None
    return settings


def _register_secrets(settings: Settings) -> None:
    """Every secret these settings make Autopilot hold, for redaction by value: the keys, the
    environment's secrets, the forge token's variable, the variables passed into sandboxes."""
    register_model_secrets(settings)
    register_environment()
    names = [settings.forge.token_env, *settings.sandbox.pass_env]
    register_secret(*(os.environ.get(name) for name in names))


def _interpreter(repo: Path, python: str) -> str:
    """The `python` setting as an absolute path (relative ones are taken from the repository:
    the runs happen in worktrees, which have no virtualenv); it must be an executable file."""
    # abspath, not resolve: a virtualenv's python is a symlink whose target is not the venv.
    path = os.path.abspath(os.path.join(repo, os.path.expanduser(python)))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ConfigError(f"invalid setting python: {path} is not an executable file")
    return path


def _directory(repo: Path, name: str, value: str) -> str:
    """A directory setting as an absolute path (relative ones are taken from the repository:
    the runs happen in worktrees, which lack what git ignores); it must be a directory."""
    path = os.path.abspath(os.path.join(repo, os.path.expanduser(value)))
    if not os.path.isdir(path):
        raise ConfigError(f"invalid setting {name}: {path} is not a directory")
    return path


def _override(obj: M, path: list[str], value: Any) -> M:
    """A copy of `obj` with the field at `path` set to `value`, validated."""
    head, *rest = path
    if head not in type(obj).model_fields:
        raise ConfigError(f"unknown setting {head}")
    new_value = _override(getattr(obj, head), rest, value) if rest else value
    if isinstance(obj, BaseSettings):
        # Re-validating a BaseSettings would read the environment again; validate the field only.
        field = type(obj).model_fields[head]
        new_value = TypeAdapter(field.annotation).validate_python(new_value)
        return obj.model_copy(update={head: new_value})
    return type(obj).model_validate({**obj.model_dump(), head: new_value})
