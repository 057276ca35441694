"""Python's prepared environment (the python-pytest toolchain's ``env_builder()``): a virtual
environment from the project's lock or requirements, plus pytest and coverage, and the project
itself as an editable install has it, built once into ``envs/python-<key>``.

What the environment is built from, first match wins:

1. ``uv.lock`` -> ``uv sync --frozen --no-install-project --all-extras`` (the lock as it is,
   the default groups and those named for tests, such as ``testing``);
2. otherwise, together: the test requirements files (``requirements-test.txt``,
   ``requirements/test.txt``...; development ones such as ``requirements/dev.txt`` only
   without a test file) and ``requirements.txt``, else the ``[project]`` dependencies and
   optional dependencies; and the dependency groups named for tests (else ``dev``; see
   :mod:`tasks.toolchains.python.requirements`) -> ``uv pip install -r ... --group ...`` (or
   pip, the groups' requirements expanded).

Then the project itself (:mod:`tasks.toolchains.python.project_install`: built by its backend,
installed without its code, so its metadata and entry points are there and the worktree's
code is what runs), pytest and coverage when the project does not pin them, and the bytecode
compiled for the environment's final place (the sandbox shows it read-only, so an uncompiled
environment would compile pytest on every run). The key is the digest of those files, of the
project's build files, its version when git gives it, and the base interpreter's version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from shutil import which

from tasks.envs.classify import classify
from tasks.envs.install import StepResult
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
from tasks.envs.space import InstallSpace
from tasks.envs.store import BuildFailed, EnvRecord
from tasks.toolchains.python.install_errors import installer_rules
from tasks.toolchains.python.project_install import (
    BUILD_FILES,
    STRIP,
    build_env,
    installable,
    key_values,
)
from tasks.toolchains.python.requirements import (
    group_requirements,
    pyproject_requirements,
    requirement_files,
    test_groups,
)

log = logging.getLogger(__name__)

RUNNER_PACKAGES = ("pytest", "coverage")
#: Variables that would steer Python or uv to another installation.
TOOL_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "UV_PROJECT_ENVIRONMENT")


def lock_inputs(project: Path) -> list[Path]:
    """The files the environment is built from; empty when there is nothing to install.
    With them, the project's build files (its metadata is installed too)."""
    build = [project / f for f in BUILD_FILES if (project / f).is_file()]
    build = build if installable(project) else []
    if (project / "uv.lock").is_file() and (project / "pyproject.toml").is_file():
        return list(dict.fromkeys([project / "pyproject.toml", project / "uv.lock", *build]))
    reqs = requirement_files(project)
    if reqs or pyproject_requirements(project) or test_groups(project):
        return list(dict.fromkeys([*reqs, *build]))
    return []


def default_base_python() -> str:
    """The interpreter Autopilot runs on, outside any virtualenv (``sys._base_executable``)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


@functools.cache
def toolchain_id(python: str) -> str:
    """``sys.version`` and the platform of `python` (asked once per process).

    Raises:
        BuildFailed: the interpreter cannot run (cause ``tool_missing``).
    """
    probe = "import sys, platform; print(sys.version.replace(chr(10), ' '), platform.machine())"
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildFailed("tool_missing", f"{python}: cannot run ({exc})") from None
    if done.returncode != 0:
        raise BuildFailed("tool_missing", f"{python}: {done.stderr.strip()[:200]}")
    return done.stdout.strip()


def find_uv(base_python: str) -> str | None:
    """uv's own binary (not a version manager's shim, which the sandbox could not run): the
    one beside the base interpreter, else the one on PATH."""
    beside = Path(base_python).parent / "uv"
    for candidate in (beside, Path(which("uv") or "")):
        path = Path(os.path.realpath(candidate))
        if candidate.name and path.is_file() and os.access(path, os.X_OK) and _binary(path):
            return str(path)
    return None


def _binary(path: Path) -> bool:
    with contextlib.suppress(OSError), path.open("rb") as fh:
        return fh.read(4) == b"\x7fELF"
    return False


class _Steps:
    """One build's install steps: each in the install sandbox, logged, checked."""

    def __init__(self, space: InstallSpace, env: dict[str, str], *, network: bool, deadline: float):
        self.space, self.env, self.network, self.deadline = space, env, network, deadline
        self.commands: list[list[str]] = []

    def __call__(
        self,
        argv: list[str],
        *,
        online: bool | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> StepResult:
        self.commands.append(argv)
        remaining = max(1.0, self.deadline - time.monotonic())
        online = self.network if online is None else online
        done = self.space.run(
            argv,
            env={**self.env, **(env or {})},
            timeout_s=remaining,
            network=online,
            drop=TOOL_VARS,
        )
        if check and not done.ok:
            raise BuildFailed(*classify(done, installer_rules, network=self.network))
        return done


def build(
    space: InstallSpace,
    *,
    base_python: str,
    toolchain: str,
    inputs: dict[str, str],
    network: bool,
    timeout_s: float,
) -> EnvRecord:
    """Create the virtualenv at ``space.out/venv`` and install into it, every step in the
    install sandbox (:mod:`tasks.envs.space`).

    Raises:
        BuildFailed: one line naming the cause (unknown package, no registry access, a
            missing native library, a lock that needs updating, uv missing for a uv.lock).
            A project that cannot be built itself is no failure: the environment is kept
            without its metadata, and its record says why.
    """
    started = time.monotonic()
    uv = find_uv(base_python)
    env = {} if network else {"UV_OFFLINE": "1", "PIP_NO_INDEX": "1"}
    env |= {
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(space.scratch / "cache" / "uv"),
        "UV_LINK_MODE": "copy",  # the cache is private to this build: nothing to share
    }
    step = _Steps(space, env, network=network, deadline=started + timeout_s)
    py = space.path("venv", "bin", "python")
    pip = [uv, "pip", "install", "--python", py] if uv else [py, "-m", "pip", "install"]
    locked = "uv.lock" in inputs
    if locked:
        _sync(step, space, uv, base_python)
    else:
        _install_requirements(step, space, uv, base_python, inputs)
    project = _install_project(step, space, pip, py, no_deps=locked)
    probe = step([py, "-c", _PROBE, *RUNNER_PACKAGES], online=False, check=False)
    missing = probe.stdout.split() if probe.ok else list(RUNNER_PACKAGES)
    if missing:
        step([*pip, *missing])
    # Bytecode as if compiled where the environment will live (tracebacks name that place).
    site = space.path("venv", "lib")
    out, final = str(space.out), str(space.final)
    step([py, "-m", "compileall", "-q", "-j", "0", "-s", out, "-p", final, site], online=False)
    return EnvRecord(
        name=space.final.name,
        stack=PythonEnvBuilder.stack,
        key=space.final.name.split("-", 1)[1],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        inputs=inputs,
        toolchain=toolchain,
        commands=[" ".join(c) for c in step.commands],
        network_used=network,
        build_s=round(time.monotonic() - started, 3),
        extra={"project": project} if project else {},
    )


def _sync(step: _Steps, space: InstallSpace, uv: str | None, base_python: str) -> None:
    if uv is None:
        raise BuildFailed("tool_missing", "uv.lock needs uv to install (install uv)")
    step.env["UV_PROJECT_ENVIRONMENT"] = space.path("venv")
    sync = [uv, "sync", "--frozen", "--no-install-project", "--all-extras"]
    groups = [arg for group in test_groups(space.project) for arg in ("--group", group)]
    step([*sync, *groups, "--python", base_python])


def _install_requirements(
    step: _Steps, space: InstallSpace, uv: str | None, base_python: str, inputs: dict[str, str]
) -> None:
    """The virtualenv, then the requirements files (else the ``[project]`` dependencies) and
    the test groups in one install (uv reads the groups itself; pip gets their requirements)."""
    venv, py = space.path("venv"), space.path("venv", "bin", "python")
    if uv is not None:
        step([uv, "venv", "--quiet", "--python", base_python, venv], online=False)
        install = [uv, "pip", "install", "--python", py]
    else:
        step([base_python, "-m", "venv", venv], online=False)
        install = [py, "-m", "pip", "install", "--disable-pip-version-check"]
    groups = test_groups(space.project)
    args = [a for r in inputs if r.endswith(".txt") for a in ("-r", r)]
    # Requirements files pin what the [project] table names (the project's own install,
    # next, brings what they leave out).
    args = args or pyproject_requirements(space.project)
    if uv is not None:
        args += [a for group in groups for a in ("--group", group)]
    else:
        args += group_requirements(space.project, groups)
    if args:
        step([*install, *args])


def _install_project(
    step: _Steps, space: InstallSpace, pip: list[str], py: str, *, no_deps: bool
) -> list[str]:
    """The project built by its backend and installed, its importable files removed again
    (:mod:`tasks.toolchains.python.project_install`); the record's line about it."""
    if not installable(space.project):
        return []
    argv = [*pip, *(["--no-deps"] if no_deps else []), "."]
    done = step(argv, check=False, env=build_env(space.project))
    if not done.ok:
        cause, message = classify(done, installer_rules, network=step.network)
        log.warning(
            "%s: the project itself was not installed (%s): %s", space.project, cause, message
        )
        return [f"not installed ({cause}): {message}"]
    script = space.scratch / "autopilot_strip_project.py"
    script.write_text(STRIP, encoding="utf-8")
    kept = step([py, str(script), str(space.src)], online=False, check=False)
    if not kept.ok:
        said = kept.output.strip().splitlines()[-1:] or [f"exit {kept.exit_code}"]
        return [f"installed, but its code could not be taken out again: {said[0]}"]
    name = kept.stdout.strip() or "the project"
    return [f"{name}: metadata and entry points installed, the code is the worktree's"]


#: Prints which of its arguments the interpreter cannot import (run inside the sandbox).
_PROBE = (
    "import importlib.util, sys\n"
    "print(' '.join(p for p in sys.argv[1:] if importlib.util.find_spec(p) is None))"
)


class PythonEnvBuilder:
    """The python-pytest toolchain's :class:`tasks.envs.builder.EnvBuilder`: a virtualenv made
    from `base_python` (default: the interpreter Autopilot runs on)."""

    stack = "python"
    #: The installer a failed build names (a suite problem's tool).
    tool = "pip"

    def __init__(self, base_python: str | None = None) -> None:
        self.base_python = base_python or default_base_python()

    def lock_inputs(self, project: Path) -> list[Path]:
        return lock_inputs(project)

    def toolchain_id(self) -> str:
        return toolchain_id(self.base_python)

    def key_values(self, project: Path) -> dict[str, str]:
        return key_values(project)

    def install_programs(self) -> list[str]:
        # The base interpreter is named by an option (`--python`), not started first.
        return [self.base_python]

    def build(
        self,
        space: InstallSpace,
        *,
        toolchain: str,
        inputs: dict[str, str],
        network: bool,
        timeout_s: float,
    ) -> EnvRecord:
        return build(
            space,
            base_python=self.base_python,
            toolchain=toolchain,
            inputs=inputs,
            network=network,
            timeout_s=timeout_s,
        )

    def run_env(self, path: Path, record: EnvRecord) -> dict[str, str]:
        # The sandbox adds an absolute interpreter's prefix and base on its own.
        return {}

    def interpreter(self, path: Path) -> str | None:
        return str(path / "venv" / "bin" / "python")

    def user_needs(self, project: Path, settings: EnvSettings) -> RunNeeds | None:
        # The user's own interpreter is the `python` setting, which the toolchain reads.
        return None
