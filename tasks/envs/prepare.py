"""Prepare a project's environment: the one function a flow calls before its test runs.

``prepare_environment(project, builder, settings=..., home=...)`` returns a
:class:`~tasks.envs.types.PreparedEnv` (built now or reused), an
:class:`~tasks.envs.types.EnvProblem` (one line: the file jobs are skipped with it), or None
when the project has nothing to prepare (no builder for its stack, no lock file: the system's
packages or the configured interpreter serve, as before). It never raises for a failed build.
The `builder` is the toolchain's (``Toolchain.env_builder()``): the stack's knowledge stays in
its folder, this module only keys, stores, locks and reports.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from tasks.core.config import SandboxSettings
from tasks.envs.builder import EnvBuilder
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
from tasks.envs.space import install_space
from tasks.envs.store import (
    BUILD_LOG,
    META_DIR,
    BuildFailed,
    EnvRecord,
    ensure_env,
    env_name,
    failed_log_path,
    json_dump,
    prune_envs,
)
from tasks.envs.types import EnvProblem, PreparedEnv, PrepareOutcome
from tasks.sandbox.view import interpreter_dirs

log = logging.getLogger(__name__)

#: Waiting for another builder of the same environment: as long as an install may take.
LOCK_MARGIN_S = 60.0
#: Changes whenever what a build installs changes (a new key makes every environment anew).
BUILD_FORMAT = 3


def env_key(inputs: dict[str, str], toolchain: str) -> str:
    """The environment's key: the lock files' digests, the toolchain version and the build
    format, hashed."""
    return hashlib.sha256(json_dump([BUILD_FORMAT, inputs, toolchain]).encode()).hexdigest()[:24]


def digest_inputs(project: Path, files: list[Path]) -> dict[str, str]:
    """Project-relative input file -> its sha256."""
    return {
        f.relative_to(project).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
    }


def prepare_environment(
    project: Path,
    builder: EnvBuilder | None,
    *,
    home: Path,
    settings: EnvSettings | None = None,
    sandbox: SandboxSettings | None = None,
) -> PrepareOutcome:
    """Build (once) or reuse the environment `project`'s tests need.

    Args:
        project: the project directory (the user's checkout or a worktree of it): its lock
            files are read, nothing is written to it.
        builder: the toolchain's environment builder (None: nothing to prepare).
        home: ``$AUTOPILOT_HOME``; environments live in ``<home>/envs``.
        settings: the ``[envs]`` settings (defaults when None).
        sandbox: the sandbox the install steps run in (its backend and limits; defaults when
            None): see :mod:`tasks.envs.space`.

    Returns:
        The environment, the problem that kept it from being built, or None when there is
        nothing to prepare (no builder, no lock file, or preparation switched off).
    """
    settings = settings or EnvSettings()
    sandbox = sandbox or SandboxSettings()
    if builder is None or not settings.prepare:
        return None
    project = Path(project).resolve()
    files = builder.lock_inputs(project)
    if not files:
        return None
    stack = builder.stack
    name = f"{stack}-?"
    try:
        tool_id = builder.toolchain_id()
        inputs = digest_inputs(project, files) | builder.key_values(project)
        name = env_name(stack, env_key(inputs, tool_id))

        def build(tmp: Path, final: Path, log_path: Path) -> EnvRecord:
            with install_space(
                project,
                tmp,
                final,
                log_path,
                sandbox=sandbox,
                allow_hosts=settings.allow_hosts,
                tool_dirs=[d for p in builder.install_programs() for d in interpreter_dirs(p)],
            ) as space:
                return builder.build(
                    space,
                    toolchain=tool_id,
                    inputs=inputs,
                    network=settings.network,
                    timeout_s=settings.install_timeout_s,
                )

        path, record, built = ensure_env(
            home, name, build, lock_timeout_s=settings.install_timeout_s + LOCK_MARGIN_S
        )
    except BuildFailed as exc:
        return _problem(home, stack, name, exc)
    prune_envs(home, max_age_days=settings.max_age_days, keep=settings.keep, protect=(name,))
    return PreparedEnv(
        stack=stack,
        name=name,
        key=record.key,
        path=str(path),
        built=built,
        inputs=sorted(inputs),
        log=str(path / META_DIR / BUILD_LOG),
        interpreter=builder.interpreter(path),
        run_env=builder.run_env(path, record),
        extra=record.extra,
    )


def _problem(home: Path, stack: str, name: str, exc: BuildFailed) -> EnvProblem:
    kept = failed_log_path(home, name)
    problem = EnvProblem(
        stack=stack,
        name=name,
        cause=exc.cause,
        message=exc.message,
        log=str(kept) if kept else None,
    )
    log.info("%s", problem.one_line())  # the caller reports it, once
    return problem


def user_environment(
    project: Path, builder: EnvBuilder | None, settings: EnvSettings
) -> RunNeeds | None:
    """What the user's own environment needs (a setting naming one), or None."""
    return builder.user_needs(project, settings) if builder is not None else None
