"""What a project's pytest configuration says about its files: ``python_files`` (which files
pytest collects) and ``testpaths`` (where its tests live), read from pytest.ini, pyproject.toml,
tox.ini or setup.cfg in pytest's own order."""

from __future__ import annotations

import configparser
import fnmatch
import re
import tomllib
from pathlib import Path, PurePosixPath

#: pytest's default ``python_files``.
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")


def is_py_test(path: str, patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES) -> bool:
    """Whether pytest collects `path` as a test file under `patterns`."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and any(fnmatch.fnmatchcase(name, p) for p in patterns)


def python_files_patterns(repo: Path) -> tuple[str, ...]:
    """pytest's ``python_files`` for the project (see :func:`pytest_option`), else the
    default ``test_*.py *_test.py``."""
    return tuple(pytest_option(repo, "python_files")) or DEFAULT_PYTHON_FILES


def python_test_roots(repo: Path) -> list[str]:
    """The directories the project's tests live in: pytest's ``testpaths`` (directories
    inside the project; a package named there stands for its test directories, so that its
    code is never taken for tests), else those of ``tests/``, ``test/``, ``testing/`` that
    exist, else the packages' test directories (:func:`package_test_dirs`), else ``tests``."""
    roots: list[str] = []
    for entry in pytest_option(repo, "testpaths"):
        rel = PurePosixPath(entry.strip("/"))
        if rel.parts and ".." not in rel.parts and (repo / rel).is_dir():
            inside = [rel / t for t in IN_PACKAGE_TESTS if (repo / rel / t).is_dir()]
            package = (repo / rel / "__init__.py").is_file()
            roots += [r.as_posix() for r in (inside if package and inside else [rel])]
    roots = roots or [d for d in ("tests", "test", "testing") if (repo / d).is_dir()]
    roots = roots or package_test_dirs(repo)
    return list(dict.fromkeys(roots)) or ["tests"]


#: A directory that names the package it tests: ``test_pkg``, ``pkg_tests``, ``pkg_unit_test``.
TEST_AFFIX = re.compile(r"tests?_(?P<pre>\w+)|(?P<post>\w+?)(?:_unit)?_tests?")
#: Test directories inside a package (``pkg/tests/test_x.py``).
IN_PACKAGE_TESTS = ("tests", "test", "_tests", "testing")


def without_test_affix(name: str) -> str:
    """``test_pkg``/``pkg_tests`` -> ``pkg``; any other name as it is."""
    if name in IN_PACKAGE_TESTS:
        return name
    found = TEST_AFFIX.fullmatch(name)
    return (found.group("pre") or found.group("post")) if found else name


def package_test_dirs(repo: Path) -> list[str]:
    """Test trees of a project without a top-level ``tests/``: those inside its top-level
    packages (``pkg/tests``, ``src/pkg/tests``), then top-level directories named after a
    package (``pkg_tests``)."""
    packages = [
        d.relative_to(repo)
        for base in (repo, repo / "src")
        for d in (sorted(base.iterdir()) if base.is_dir() else [])
        if d.is_dir() and (d / "__init__.py").is_file()
    ]
    inside = [
        (p / t).as_posix() for p in packages for t in IN_PACKAGE_TESTS if (repo / p / t).is_dir()
    ]
    names = {p.name for p in packages}
    named = sorted(
        d.name
        for d in (repo.iterdir() if repo.is_dir() else [])
        if d.is_dir() and d.name not in names and without_test_affix(d.name) in names
    )
    return inside + named


def pytest_option(repo: Path, key: str) -> list[str]:
    """A list option of the project's pytest configuration (``python_files``,
    ``testpaths``), from the first of pytest.ini, pyproject.toml, tox.ini and setup.cfg that
    configures pytest (pytest's own order); [] when unset."""
    for name, section in (
        ("pytest.ini", "pytest"),
        ("pyproject.toml", ""),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        path = repo / name
        if not path.is_file():
            continue
        value = _ini_value(path, section, key) if section else _pyproject_value(path, key)
        if value is _UNSET:
            continue
        items = value.split() if isinstance(value, str) else value
        return [v for v in items if isinstance(v, str) and v] if isinstance(items, list) else []
    return []


_UNSET: object = object()


def _ini_value(path: Path, section: str, key: str) -> object:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return _UNSET
    if not parser.has_section(section):
        return _UNSET
    return parser.get(section, key, fallback=None)


def _pyproject_value(path: Path, key: str) -> object:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return _UNSET
    options = data.get("tool", {}).get("pytest", {}).get("ini_options")
    if not isinstance(options, dict):
        return _UNSET
    return options.get(key)
