"""Preparing the template database the project's way, inside the sandbox: the declared
``schema_command``, else the toolchain's convention (``Toolchain.schema_command``)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tasks.envs.needs import RunnerLike
from tasks.services.binaries import ServiceError

#: The toolchain's conventional schema command and its variables (``Toolchain.schema_command``).
Convention = tuple[list[str], dict[str, str]] | None


def schema_command(declared: str | None, convention: Convention = None) -> Convention:
    """The command that loads the schema and its variables: the declared one (with the
    convention's variables), else the toolchain's convention, else None."""
    if declared:
        try:
            argv = shlex.split(declared)
        except ValueError as exc:
            raise ServiceError(f"[services] schema_command {declared!r}: {exc}") from None
        return argv, dict(convention[1]) if convention else {}
    return convention


def prepare_schema(
    runner: RunnerLike,
    project: Path,
    env: Mapping[str, str],
    *,
    declared: str | None,
    timeout_s: float,
    convention: Convention = None,
) -> str | None:
    """Run the schema command in `project` through `runner` (a sandbox) with `env`.

    Returns the command run (None when there is none). Raises ServiceError with the
    command's most telling line when it fails.
    """
    command = schema_command(declared, convention)
    if command is None:
        return None
    argv, own = command
    full = {**own, **env}
    done = runner.run(argv, cwd=project, env=full, timeout_s=timeout_s)
    if done.exit_code != 0 or done.reason:
        text = (done.stderr or done.stdout).strip().splitlines()
        telling = next(
            (ln for ln in text if "Error" in ln or "error" in ln), text[-1] if text else ""
        )
        why = done.reason or f"exit {done.exit_code}"
        raise ServiceError(f"schema command {' '.join(argv)!r} failed ({why}): {telling[:300]}")
    return " ".join(argv)
