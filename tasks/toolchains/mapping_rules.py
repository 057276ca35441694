"""Name rules beyond the plain ones of :mod:`tasks.toolchains.mapping`: what pytest collects (the
project's ``python_files``), plural and singular test names, suites named after the project, and
test files the framework would never load (warned about)."""

from __future__ import annotations

import ast
import configparser
import fnmatch
import re
import tomllib
from pathlib import Path, PurePosixPath

from tasks.core.types import ToolchainName

#: pytest's default ``python_files``.
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
_DEFINES_TESTS = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+Test", re.MULTILINE)
_DEFINES_EXAMPLES = re.compile(r"^\s*(?:RSpec\.)?(?:describe|context|feature)\b", re.MULTILINE)


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
    inside the project), else those of ``tests/``, ``test/``, ``testing/`` that exist, else
    ``tests``."""
    roots: list[str] = []
    for entry in pytest_option(repo, "testpaths"):
        rel = PurePosixPath(entry.strip("/"))
        if rel.parts and ".." not in rel.parts and (repo / rel).is_dir():
            roots.append(rel.as_posix())
    roots = roots or [d for d in ("tests", "test", "testing") if (repo / d).is_dir()]
    return list(dict.fromkeys(roots)) or ["tests"]


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


def other_numbers(word: str) -> list[str]:
    """The plural and singular forms a test file may use for a module named `word`."""
    forms = [f"{word}s", f"{word}es"]
    if word.endswith("y") and len(word) > 1:
        forms.append(f"{word[:-1]}ies")
    if word.endswith("ies") and len(word) > 3:
        forms.append(f"{word[:-3]}y")
    elif word.endswith("es") and len(word) > 2:
        forms.append(word[:-2])
    if word.endswith("s") and len(word) > 1:
        forms.append(word[:-1])
    return [f for f in dict.fromkeys(forms) if f and f != word]


# --- project-named suites and files the framework would not load ------------------------------


def _project_names(repo: Path, sources: list[str]) -> dict[str, str]:
    """Normalised project or top-level package name -> that package's directory prefix."""
    names: dict[str, str] = {}
    for src in sources:
        parts = PurePosixPath(src).parts
        parts = parts[1:] if parts[0] == "src" else parts
        if len(parts) > 1:
            prefix = "src/" if src.startswith("src/") else ""
            names.setdefault(_norm(parts[0]), f"{prefix}{parts[0]}/")
    project = _pyproject_name(repo)
    if project and len(set(names.values())) == 1:
        names.setdefault(_norm(project), next(iter(names.values())))
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "", name).lower()


def _pyproject_name(repo: Path) -> str | None:
    try:
        with (repo / "pyproject.toml").open("rb") as fh:
            name = tomllib.load(fh).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


def _defines(repo: Path, source: str, name: str) -> bool:
    """Whether `source` defines a top-level class or function called `name` (normalised)."""
    try:
        tree = ast.parse((repo / source).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    kinds = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    return any(isinstance(n, kinds) and _norm(n.name) == name for n in tree.body)


def project_suites(
    repo: Path,
    sources: list[str],
    specs: list[str],
    owners: dict[str, list[str]],
    roots: list[str] | None = None,
) -> None:
    """Give each unowned ``tests/test_<project>.py`` to what it most likely tests (see the
    module docstring); `owners` is changed in place."""
    owned = {s for specs_of in owners.values() for s in specs_of}
    names = _project_names(repo, sources)
    for spec in specs:
        stem = PurePosixPath(spec).stem
        name = _norm(stem.removeprefix("test_").removesuffix("_test"))
        in_root = spec.startswith(tuple(f"{r}/" for r in roots or ["tests"]))
        if spec in owned or name not in names or not in_root:
            continue
        prefix = names[name]
        members = [s for s in sources if s.startswith(prefix)]
        chosen = [s for s in members if s == f"{prefix}__init__.py"]
        chosen = chosen or [s for s in members if _defines(repo, s, name)]
        chosen = chosen or [s for s in members if not owners.get(s)]
        for source in chosen:
            owners.setdefault(source, []).append(spec)


def unloaded_test_files(
    repo: Path,
    toolchain: ToolchainName,
    files: list[str],
    specs: list[str],
    roots: list[str] | None = None,
) -> list[str]:
    """Warnings for files that hold tests the framework will never run (wrong file name)."""
    taken = set(specs)
    warnings: list[str] = []
    for path in files:
        if path in taken or not _in_test_tree(path, toolchain, roots or ["tests", "test"]):
            continue
        if toolchain == "ruby-rspec":
            if not path.endswith(".rb") or _rspec_pattern_set(repo):
                continue
            if _matches(repo, path, _DEFINES_EXAMPLES):
                fix = path.removesuffix(".rb") + "_spec.rb"
                warnings.append(
                    f"{path}: holds examples but RSpec only loads files ending in _spec.rb "
                    f"(rename it {fix})"
                )
        elif path.endswith(".py") and _matches(repo, path, _DEFINES_TESTS):
            warnings.append(
                f"{path}: defines tests but pytest does not collect it (its name matches no "
                "python_files pattern: test_*.py or *_test.py by default)"
            )
    return warnings


def _in_test_tree(path: str, toolchain: ToolchainName, roots: list[str]) -> bool:
    parts = PurePosixPath(path).parts
    if toolchain == "ruby-rspec":
        support = {"support", "factories", "fixtures", "shared_examples", "shared_contexts"}
        return parts[0] == "spec" and len(parts) > 1 and not support.intersection(parts)
    name = parts[-1]
    inside = any(path.startswith(f"{root}/") for root in roots)
    return inside and name not in ("conftest.py", "__init__.py")


def _rspec_pattern_set(repo: Path) -> bool:
    try:
        return "--pattern" in (repo / ".rspec").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _matches(repo: Path, path: str, pattern: re.Pattern[str]) -> bool:
    try:
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return pattern.search(text) is not None
