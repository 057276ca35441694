"""The ``[services]`` settings group (``Settings.services``; defined in
:mod:`tasks.core.run_settings`): which throwaway servers a project's tests need."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from tasks.core.run_settings import ServicesSettings, version_spec

__all__ = ["ServicesSettings", "services_from_toml", "version_spec"]


def services_from_toml(repo: Path) -> ServicesSettings:
    """The ``[services]`` table of `repo`'s ``autopilot.toml`` (defaults when absent).

    (``load_settings(repo).services`` reads the same table with the rest of the settings.)

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
