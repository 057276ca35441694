"""Preparing the template database the project's way, inside the sandbox."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tasks.envs.needs import RunnerLike
from tasks.services.binaries import ServiceError


def schema_command(project: Path, declared: str | None) -> list[str] | None:
    """The command that loads the schema: the declared one, else the Rails convention
    (``db:schema:load`` when a schema file exists, else ``db:prepare``), else None."""
    if declared:
        try:
            return shlex.split(declared)
        except ValueError as exc:
            raise ServiceError(f"[services] schema_command {declared!r}: {exc}") from None
    rails = project / "bin" / "rails"
    if rails.is_file() and (project / "config" / "database.yml").is_file():
        schema = project / "db" / "schema.rb"
        structure = project / "db" / "structure.sql"
        task = "db:schema:load" if schema.is_file() or structure.is_file() else "db:prepare"
        return ["bin/rails", task]
    return None


def prepare_schema(
    runner: RunnerLike,
    project: Path,
    env: Mapping[str, str],
    *,
    declared: str | None,
    timeout_s: float,
) -> str | None:
    """Run the schema command in `project` through `runner` (a sandbox) with `env`.

    Returns the command run (None when there is none). Raises ServiceError with the
    command's most telling line when it fails.
    """
    argv = schema_command(project, declared)
    if argv is None:
        return None
    full = {"RAILS_ENV": "test", "DISABLE_DATABASE_ENVIRONMENT_CHECK": "1", **env}
    done = runner.run(argv, cwd=project, env=full, timeout_s=timeout_s)
    if done.exit_code != 0 or done.reason:
        text = (done.stderr or done.stdout).strip().splitlines()
        telling = next(
            (ln for ln in text if "Error" in ln or "error" in ln), text[-1] if text else ""
        )
        why = done.reason or f"exit {done.exit_code}"
        raise ServiceError(f"schema command {' '.join(argv)!r} failed ({why}): {telling[:300]}")
    return " ".join(argv)
