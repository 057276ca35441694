"""Python's prepared environment (the python-pytest toolchain's ``env_builder()``): a virtual
environment from the project's lock or requirements, plus pytest and
coverage, built once into ``envs/python-<key>``.

What the environment is built from, first match wins:

1. ``uv.lock`` -> ``uv sync --frozen --no-install-project --all-extras`` (the lock as it is,
   the default groups and those named for tests or development, such as ``testing``, the
   project itself left out: the worktree's code is what the tests import);
2. requirements files (``requirements-dev.txt``, ``requirements/test.txt``, ...,
   ``requirements.txt``) -> ``uv pip install -r ...`` (or pip when uv is not installed);
3. ``pyproject.toml`` alone -> its ``[project]`` dependencies and optional dependencies.

Then pytest and coverage are added when the project does not pin them, and the bytecode is
compiled for the environment's final place (the sandbox shows it read-only, so an uncompiled
environment would compile pytest on every run). The key is the digest of those files and the
base interpreter's version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from shutil import which

from tasks.envs.classify import classify
from tasks.envs.install import StepResult
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
from tasks.envs.space import InstallSpace
from tasks.envs.store import BuildFailed, EnvRecord
from tasks.toolchains.python.install_errors import installer_rules

#: Requirements files, most specific to the tests first; every one present is installed.
REQUIREMENTS = (
    "requirements-dev.txt",
    "requirements-test.txt",
    "requirements_dev.txt",
    "requirements_test.txt",
    "dev-requirements.txt",
    "test-requirements.txt",
    "requirements/dev.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements.txt",
)
RUNNER_PACKAGES = ("pytest", "coverage")
#: Variables that would steer Python or uv to another installation.
TOOL_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "UV_PROJECT_ENVIRONMENT")
_TEST_GROUP = re.compile(r"^(?:dev|develop|development)$|test", re.IGNORECASE)


def lock_inputs(project: Path) -> list[Path]:
    """The files the environment is built from; empty when there is nothing to install."""
    if (project / "uv.lock").is_file() and (project / "pyproject.toml").is_file():
        return [project / "pyproject.toml", project / "uv.lock"]
    reqs = [project / r for r in REQUIREMENTS if (project / r).is_file()]
    if reqs:
        return reqs
    if _pyproject_requirements(project):
        return [project / "pyproject.toml"]
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


def _pyproject_requirements(project: Path) -> list[str]:
    try:
        data = tomllib.loads((project / "pyproject.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    found = data.get("project")
    meta: dict = found if isinstance(found, dict) else {}
    reqs = [r for r in meta.get("dependencies") or [] if isinstance(r, str)]
    for group in (meta.get("optional-dependencies") or {}).values():
        reqs += [r for r in group if isinstance(r, str)] if isinstance(group, list) else []
    return reqs


def test_groups(project: Path) -> list[str]:
    """The project's dependency groups that tests need besides the default ones: those named
    for tests or development (``test``, ``testing``, ``dev``): projects keep pytest plugins
    there."""
    try:
        data = tomllib.loads((project / "pyproject.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    groups = data.get("dependency-groups")
    names = groups.keys() if isinstance(groups, dict) else []
    return sorted(n for n in names if _TEST_GROUP.search(n))


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
    """
    started = time.monotonic()
    deadline = started + timeout_s
    uv = find_uv(base_python)
    env = {} if network else {"UV_OFFLINE": "1", "PIP_NO_INDEX": "1"}
    env |= {
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(space.scratch / "cache" / "uv"),
        "UV_LINK_MODE": "copy",  # the cache is private to this build: nothing to share
    }
    venv = space.path("venv")
    py = space.path("venv", "bin", "python")
    commands: list[list[str]] = []

    def step(argv: list[str], *, online: bool = network, check: bool = True) -> StepResult:
        commands.append(argv)
        remaining = max(1.0, deadline - time.monotonic())
        done = space.run(argv, env=env, timeout_s=remaining, network=online, drop=TOOL_VARS)
        if check and not done.ok:
            raise BuildFailed(*classify(done, installer_rules, network=network))
        return done

    if "uv.lock" in inputs:
        if uv is None:
            raise BuildFailed("tool_missing", "uv.lock needs uv to install (install uv)")
        env["UV_PROJECT_ENVIRONMENT"] = venv
        sync = [uv, "sync", "--frozen", "--no-install-project", "--all-extras"]
        groups = [arg for group in test_groups(space.project) for arg in ("--group", group)]
        step([*sync, *groups, "--python", base_python])
    else:
        if uv is not None:
            step([uv, "venv", "--quiet", "--python", base_python, venv], online=False)
            install = [uv, "pip", "install", "--python", py]
        else:
            step([base_python, "-m", "venv", venv], online=False)
            install = [py, "-m", "pip", "install", "--disable-pip-version-check"]
        reqs = [f for f in inputs if f.endswith(".txt")]
        if reqs:
            step([*install, *[a for r in reqs for a in ("-r", r)]])
        elif extra := _pyproject_requirements(space.project):
            step([*install, *extra])
    probe = step([py, "-c", _PROBE, *RUNNER_PACKAGES], online=False, check=False)
    missing = probe.stdout.split() if probe.ok else list(RUNNER_PACKAGES)
    if missing:
        pip = [uv, "pip", "install", "--python", py] if uv else [py, "-m", "pip", "install"]
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
        commands=[" ".join(c) for c in commands],
        network_used=network,
        build_s=round(time.monotonic() - started, 3),
    )


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
