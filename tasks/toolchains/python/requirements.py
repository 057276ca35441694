"""What a Python project says its tests need, read from its files (never by running them):
requirements files, ``[project]`` dependencies, and PEP 735 ``[dependency-groups]``.

Selective on purpose: the tests' own requirements, not the documentation's or the type
checker's. A project that keeps ``requirements/test.txt`` and ``requirements/dev.txt`` (the
latter usually test + docs + typing) gets the test file; a dev file only when it has no test
file. Among dependency groups, those named for tests (``test``, ``tests``, ``testing``); a
``dev`` group only when none is (a group's ``{include-group = ...}`` entries are followed, as
PEP 735 says).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

#: Requirements files for the tests, most specific first; every one present is installed.
TEST_REQUIREMENTS = (
    "requirements-test.txt",
    "requirements-tests.txt",
    "requirements_test.txt",
    "requirements_tests.txt",
    "test-requirements.txt",
    "tests-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
)
#: Development requirements (often tests, docs and typing together): only without a test file.
DEV_REQUIREMENTS = (
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements/dev.txt",
    "requirements/development.txt",
)
#: The runtime requirements, installed beside either.
RUNTIME_REQUIREMENTS = ("requirements.txt",)
_TEST_GROUP = re.compile(r"test", re.IGNORECASE)
_DEV_GROUP = re.compile(r"^(?:dev|develop|development)$", re.IGNORECASE)


def requirement_files(project: Path) -> list[Path]:
    """The requirements files to install: the test ones (else the development ones), then
    the runtime one."""
    present = [
        [project / name for name in names if (project / name).is_file()]
        for names in (TEST_REQUIREMENTS, DEV_REQUIREMENTS, RUNTIME_REQUIREMENTS)
    ]
    tests, dev, runtime = present
    return (tests or dev) + runtime


def pyproject(project: Path) -> dict[str, Any]:
    """The project's ``pyproject.toml``, or {} when it has none or it does not parse."""
    try:
        return tomllib.loads((project / "pyproject.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def pyproject_requirements(project: Path) -> list[str]:
    """``[project] dependencies`` and every optional dependency."""
    found = pyproject(project).get("project")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    reqs = [r for r in meta.get("dependencies") or [] if isinstance(r, str)]
    extras = meta.get("optional-dependencies")
    for group in (extras if isinstance(extras, dict) else {}).values():
        reqs += [r for r in group if isinstance(r, str)] if isinstance(group, list) else []
    return reqs


def _groups(project: Path) -> dict[str, list[Any]]:
    groups = pyproject(project).get("dependency-groups")
    if not isinstance(groups, dict):
        return {}
    return {_norm(k): v for k, v in groups.items() if isinstance(v, list)}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_groups(project: Path) -> list[str]:
    """The dependency groups the tests need: those named for tests, else a ``dev`` group."""
    names = sorted(_groups(project))
    return [n for n in names if _TEST_GROUP.search(n)] or [n for n in names if _DEV_GROUP.match(n)]


def group_requirements(project: Path, names: list[str]) -> list[str]:
    """The requirements of the groups `names`, ``include-group`` entries followed (each group
    once; a cycle or an unknown group contributes nothing)."""
    groups = _groups(project)
    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        if name in seen or name not in groups:
            return
        seen.add(name)
        for entry in groups[name]:
            if isinstance(entry, str):
                out.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
                add(_norm(entry["include-group"]))

    for name in names:
        add(_norm(name))
    return list(dict.fromkeys(out))
