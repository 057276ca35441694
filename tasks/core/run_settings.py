"""The setting groups of the real-repository parts: ``[envs]`` (prepared environments),
``[services]`` (throwaway servers per run), ``[forge]`` (where pull requests are opened) and
``[history]`` (the run history store).

They are fields of :class:`tasks.core.config.Settings` (``settings.envs``, ``.services``,
``.forge``); the parts that use them (``tasks.envs``, ``tasks.services``, ``tasks.forge``)
re-export them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tasks.core.settings_base import _Group


class EnvSettings(_Group):
    """Prepared environments: built once per lock file and toolchain, reused read-only."""

    model_config = ConfigDict(extra="forbid")

    prepare: bool = Field(
        True,
        description="Build the project's environment from its lock file before the test runs "
        "(the toolchain names the files); off: the system's packages or the interpreter "
        "setting only",
    )
    network: bool = Field(
        True,
        description="The install step may reach the package registries (the only step that "
        "ever may; through Autopilot's egress proxy, from its own sandbox); off: the "
        "machine's installed gems and the project's vendor/cache only",
    )
    allow_hosts: list[str] | None = Field(
        None,
        description="The only hosts the install step may reach (names, '*.suffix' patterns or "
        "IPs, each with an optional :port; an internal mirror is allowed at any address); "
        "unset: any host at a public address, never the host's loopback, link-local, private "
        "networks or its own addresses",
    )
    install_timeout_s: float = Field(
        1800.0, gt=0, description="Wall-clock limit of one environment's whole install"
    )
    max_age_days: float = Field(
        30.0, gt=0, description="Environments unused for this long are pruned"
    )
    keep: int = Field(10, ge=1, description="At most this many environments are kept")
    bundle_path: str | None = Field(
        None,
        description="A bundle the user installed themselves (BUNDLE_PATH, e.g. vendor/bundle), "
        "used instead of a prepared environment",
    )
    ruby: str | None = Field(
        None,
        description="An interpreter whose bin/ goes first on the sandbox's PATH (e.g. an rbenv "
        "installation) for the stacks that read it; default: the system's",
    )

    @field_validator("allow_hosts")
    @classmethod
    def _check_hosts(cls, hosts: list[str] | None) -> list[str] | None:
        for entry in hosts or []:
            if not _ALLOWED_HOST.fullmatch(entry.strip()):
                raise ValueError(f"{entry!r}: expected a host name, '*.suffix' or an IP[:port]")
        return hosts


_ALLOWED_HOST = re.compile(r"(?:\*\.)?[A-Za-z0-9_.-]+(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?")
_BARE = re.compile(r"\d+(?:\.\d+)*")


def version_spec(pin: str) -> str:
    """A pin as a version specifier: ``"15"`` -> ``==15.*``; specifiers stay as they are."""
    pin = pin.strip()
    return f"=={pin}.*" if _BARE.fullmatch(pin) else pin


class ServicesSettings(_Group):
    """Throwaway servers per run, from the machine's packages, reachable by socket only.

    ``postgres = true`` (or a version pin such as ``"15"`` or ``">=14,<17"``) and
    ``redis = true`` (or a pin) in ``autopilot.toml``'s ``[services]``.
    """

    model_config = ConfigDict(extra="forbid")

    postgres: bool | str = Field(
        False, description="A PostgreSQL server for the run: true, or a version pin ('15')"
    )
    redis: bool | str = Field(
        False, description="A Redis server for the run: true, or a version pin ('7')"
    )
    schema_command: str | None = Field(
        None,
        description="How the project prepares its database schema, run once in the sandbox "
        "against the template database (default: the toolchain's convention, if it has one)",
    )
    database: str = Field(
        "autopilot_test",
        pattern=r"^[a-z_][a-z0-9_]{0,40}$",
        description="Name of the template database; each file job gets a copy of it",
    )
    start_timeout_s: float = Field(60.0, gt=0, description="How long a server may take to start")
    schema_timeout_s: float = Field(600.0, gt=0, description="Limit of the schema command")

    @field_validator("postgres", "redis")
    @classmethod
    def _check_pin(cls, value: bool | str) -> bool | str:
        if isinstance(value, str):
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            try:
                SpecifierSet(version_spec(value))
            except InvalidSpecifier:
                raise PydanticCustomError(
                    "version_pin", "{pin!r}: not a version or version range", {"pin": value}
                ) from None
        return value

    @property
    def any(self) -> bool:
        """Whether the project declared a service at all."""
        return self.postgres is not False or self.redis is not False


DEFAULT_API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}


class ForgeSettings(_Group):
    """A GitHub or GitLab project to open pull (merge) requests on."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["github", "gitlab"] | None = Field(
        None, description="github or gitlab; unset: no pull request is ever opened"
    )
    repository: str | None = Field(
        None,
        description="GitHub: owner/name; GitLab: the project's numeric id or its full path "
        "(group/subgroup/project)",
    )
    api_url: str | None = Field(
        None,
        description="The REST API root (GitHub Enterprise: https://host/api/v3; self-managed "
        "GitLab: https://host/api/v4); default: the public service's",
    )
    base: str = Field("main", description="The branch the pull request targets")
    token_secret: str | None = Field(
        None, description="Name of the Prefect Secret block holding the token"
    )
    token_env: str = Field(
        "AUTOPILOT_FORGE_TOKEN",
        description="Environment variable holding the token (GITHUB_TOKEN or GITLAB_TOKEN "
        "are read when it is unset)",
    )
    draft: bool = Field(False, description="Open pull requests as drafts")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout")

    @model_validator(mode="after")
    def _needs_repository(self) -> ForgeSettings:
        if self.kind is not None and not self.repository:
            raise ValueError(f"forge.kind = {self.kind!r} needs forge.repository")
        if self.kind == "github" and self.repository and self.repository.count("/") != 1:
            raise ValueError(f"forge.repository {self.repository!r}: expected owner/name")
        return self

    @property
    def configured(self) -> bool:
        return self.kind is not None

    @property
    def api(self) -> str:
        """The API root without a trailing slash."""
        assert self.kind is not None
        return (self.api_url or DEFAULT_API[self.kind]).rstrip("/")


class HistorySettings(_Group):
    """The run history store: every test's results, every file's verdicts and every repair
    group's outcome across runs (the memory the quarantine, the skips, the shard merge and the
    trend read)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True, description="Keep and use the run history (off: every run starts from nothing)"
    )
    url: SecretStr | None = Field(
        None,
        description="The store: postgresql://user:password@host/db for a team's shared server, "
        "or sqlite:///path; default: SQLite at <home>/history.sqlite3",
    )
    lock_timeout_s: float = Field(
        5.0,
        gt=0,
        description="How long a run waits for a store another process holds before it goes on "
        "without memory (the run's records are then kept in <home>/history-spool and written "
        "by a later run)",
    )
    flaky_runs: int = Field(
        10,
        ge=2,
        description="A test whose result flipped (passed and failed) at one commit within its "
        "last N observed runs is quarantined as flaky: never sent to repair",
    )
    flaky_window_days: float = Field(
        14.0, gt=0, description="Only results observed within this many days count as evidence"
    )
    skip_after: int = Field(
        2,
        ge=1,
        description="A file rejected this many times running at the same gate, with unchanged "
        "source, skill and prompts, is skipped by the nightly",
    )
    skip_nights: int = Field(
        3, ge=0, description="For how many nightly runs such a file is skipped (0: never)"
    )
    shard_window_s: float = Field(
        3600.0,
        ge=0,
        description="Repair runs of one commit started within this many seconds of the first "
        "are shards of one run: a failure signature another shard already took is not "
        "repaired again (0: no merging)",
    )
    trend_runs: int = Field(
        30, ge=2, description="Runs shown in the trend (the artifact's chart and tables)"
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: SecretStr | None) -> SecretStr | None:
        if url is not None:
            scheme = url.get_secret_value().split("://", 1)[0]
            if scheme not in ("sqlite", "postgresql", "postgres"):
                raise ValueError(f"{scheme!r}: expected postgresql://... or sqlite:///path")
        return url
