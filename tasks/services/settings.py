"""The ``[services]`` settings group (to be hooked into ``tasks.core.config.Settings`` as
``services``): which throwaway servers a project's tests need."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

_BARE = re.compile(r"\d+(?:\.\d+)*")


def version_spec(pin: str) -> str:
    """A pin as a version specifier: ``"15"`` -> ``==15.*``; specifiers stay as they are."""
    pin = pin.strip()
    return f"=={pin}.*" if _BARE.fullmatch(pin) else pin


class ServicesSettings(BaseModel):
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


def services_from_toml(repo: Path) -> ServicesSettings:
    """The ``[services]`` table of `repo`'s ``autopilot.toml`` (defaults when absent).

    Until ``tasks.core.config.Settings`` carries the group, this reads it on its own.

    Raises:
        ServiceError: the file cannot be read or the table is invalid (one line).
    """
    from tasks.services.binaries import ServiceError

    path = Path(repo) / "autopilot.toml"
    try:
        data = tomllib.loads(path.read_text("utf-8")) if path.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ServiceError(f"{path}: {exc}") from None
    table = data.get("autopilot", data).get("services", {})
    try:
        return ServicesSettings.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ServiceError(f"{path}: invalid setting services.{where}: {first['msg']}") from None
