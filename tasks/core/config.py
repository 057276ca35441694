"""Settings: `AUTOPILOT_*` environment variables over an optional repo `autopilot.toml`.

Nothing is read at import time; call :func:`load_settings`.
Nested groups use `__` in environment names, e.g. `AUTOPILOT_GATES__MIN_COVERAGE=0.8`.
The repository's file never widens the operator's security settings
(:mod:`tasks.core.operator_only`); the secrets the settings hold are registered for redaction
by value (:mod:`tasks.core.secret_values`).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    TypeAdapter,
    ValidationError,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tasks.core.errors import ConfigError
from tasks.core.operator_only import IgnoredSetting, Screened, screen, warn
from tasks.core.run_settings import EnvSettings, ForgeSettings, HistorySettings, ServicesSettings
from tasks.core.secret_values import register_environment, register_model_secrets, register_secret
from tasks.core.setting_groups import (
    GateSettings,
    ModelNames,
    ModelSettings,
    PremergeSettings,
    RepairSettings,
    RuleId,
    SandboxSettings,
    declared_path_problem,
)
from tasks.core.settings_base import _Group

__all__ = [
    "CONFIG_FILE",
    "GateSettings",
    "LoadedSettings",
    "ModelNames",
    "ModelSettings",
    "PremergeSettings",
    "RepairSettings",
    "RuleId",
    "SandboxSettings",
    "Settings",
    "declared_path_problem",
    "load_settings",
    "load_settings_report",
]

CONFIG_FILE = "autopilot.toml"
M = TypeVar("M", bound=BaseModel)


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
    premerge: PremergeSettings = Field(
        default_factory=PremergeSettings,
        description="Pre-merge runs on a pull request's changed lines",
    )
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
