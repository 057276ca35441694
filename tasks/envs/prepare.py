"""Prepare a project's environment: the one function a flow calls before its test runs.

``prepare_environment(project, toolchain, settings=..., home=...)`` returns a
:class:`~tasks.envs.types.PreparedEnv` (built now or reused), an
:class:`~tasks.envs.types.EnvProblem` (one line: the file jobs are skipped with it), or None
when the project has nothing to prepare (no lock file: the system's gems or the configured
interpreter serve, as before). It never raises for a failed build.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import tasks.envs.python as py_env
import tasks.envs.ruby as rb_env
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
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
from tasks.envs.types import EnvProblem, PreparedEnv, PrepareOutcome, Stack

log = logging.getLogger(__name__)

#: Which stack a toolchain's environment is.
STACKS: dict[str, Stack] = {"ruby-rspec": "ruby", "python-pytest": "python"}
#: Waiting for another builder of the same environment: as long as an install may take.
LOCK_MARGIN_S = 60.0


#: Changes whenever what a build installs changes (a new key makes every environment anew).
BUILD_FORMAT = 2


def env_key(inputs: dict[str, str], toolchain: str) -> str:
    """The environment's key: the lock files' digests, the toolchain version and the build
    format, hashed."""
    return hashlib.sha256(json_dump([BUILD_FORMAT, inputs, toolchain]).encode()).hexdigest()[:24]


def prepare_environment(
    project: Path,
    toolchain: str,
    *,
    home: Path,
    settings: EnvSettings | None = None,
    base_python: str | None = None,
) -> PrepareOutcome:
    """Build (once) or reuse the environment `project`'s tests need.

    Args:
        project: the project directory (the user's checkout or a worktree of it): its lock
            files are read, nothing is written to it.
        toolchain: ``ruby-rspec`` or ``python-pytest``.
        home: ``$AUTOPILOT_HOME``; environments live in ``<home>/envs``.
        settings: the ``[envs]`` settings (defaults when None).
        base_python: the interpreter a Python environment is made from (default: the one
            Autopilot runs on).

    Returns:
        The environment, the problem that kept it from being built, or None when there is
        nothing to prepare (no lock file, or preparation switched off).
    """
    settings = settings or EnvSettings()
    stack = STACKS.get(toolchain)
    if stack is None or not settings.prepare:
        return None
    project = Path(project).resolve()
    module = rb_env if stack == "ruby" else py_env
    files = module.lock_inputs(project)
    if not files:
        return None
    name = f"{stack}-?"
    try:
        base = base_python or py_env.default_base_python()
        tool_id = rb_env.toolchain_id() if stack == "ruby" else py_env.toolchain_id(base)
        inputs = module.digest_inputs(project, files)
        name = env_name(stack, env_key(inputs, tool_id))

        def build(tmp: Path, final: Path, log_path: Path) -> EnvRecord:
            common = {
                "toolchain": tool_id,
                "inputs": inputs,
                "network": settings.network,
                "timeout_s": settings.install_timeout_s,
            }
            if stack == "ruby":
                gem_path = rb_env.system_gem_path()
                return rb_env.build(project, tmp, final, log_path, gem_path=gem_path, **common)
            return py_env.build(project, tmp, final, log_path, base_python=base, **common)

        path, record, built = ensure_env(
            home, name, build, lock_timeout_s=settings.install_timeout_s + LOCK_MARGIN_S
        )
    except BuildFailed as exc:
        kept = failed_log_path(home, name)
        problem = EnvProblem(
            stack=stack,
            name=name,
            cause=exc.cause,
            message=exc.message,
            log=str(kept) if kept else None,
        )
        log.warning("%s", problem.one_line())
        return problem
    prune_envs(home, max_age_days=settings.max_age_days, keep=settings.keep, protect=(name,))
    return PreparedEnv(
        stack=stack,
        name=name,
        key=record.key,
        path=str(path),
        built=built,
        inputs=sorted(inputs),
        log=str(path / META_DIR / BUILD_LOG),
        python=str(path / "venv" / "bin" / "python") if stack == "python" else None,
        gem_path=record.extra.get("gem_path", []),
        bundler=next(iter(record.extra.get("bundler") or []), None),
    )


def user_environment(project: Path, settings: EnvSettings) -> RunNeeds | None:
    """What the user's own environment needs (``bundle_path``, ``ruby``), or None.

    ``bundle_path`` is a bundle installed with ``BUNDLE_PATH`` (relative paths are taken from
    `project`); ``ruby`` an interpreter whose ``bin`` directory goes first on PATH.
    """
    dirs: list[str] = []
    env: dict[str, str] = {}
    if settings.bundle_path:
        bundle = os.path.abspath(os.path.join(project, os.path.expanduser(settings.bundle_path)))
        dirs.append(bundle)
        env |= {
            "BUNDLE_PATH": bundle,
            "BUNDLE_GEMFILE": str(Path(project) / "Gemfile"),
            "BUNDLE_FROZEN": "true",
        }
    if settings.ruby:
        ruby = os.path.abspath(os.path.expanduser(settings.ruby))
        prefix = os.path.dirname(os.path.dirname(ruby))
        dirs.append(prefix)
        env["PATH"] = f"{os.path.dirname(ruby)}:/usr/local/bin:/usr/bin:/bin"
    return RunNeeds(dirs=tuple(dirs), env=env) if dirs else None
