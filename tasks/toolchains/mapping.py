"""Find a repository's testable source files, their kinds, and the specs that cover them.

Rules (the contract; tests/tasks/toolchains/test_mapping.py exercises each one):

ruby-rspec
    ``*.rb`` under ``app/`` and ``lib/`` are sources, and so are those of any other top-level
    folder that holds Ruby code (``extras/``, ``engines/``...) except the ones Rails and RSpec
    own (config/, db/, spec/, test/, features/, bin/, script/, public/, vendor/, tmp/, log/,
    coverage/, storage/, node_modules/, doc/). Kind by location: ``app/models`` model,
    ``app/serializers`` serializer, ``app/controllers`` controller, ``app/mailers`` mailer,
    ``app/helpers`` helper; the rest of ``app/`` (services, jobs, ...) and ``lib/`` plain ruby.
    ``app/*/concerns/`` are modules mixed into others, so they are plain ruby too.
    Skipped: ``app/assets``, ``app/views``, ``app/javascript``, ``app/channels/application_cable``,
    every ``application_*.rb`` under ``app/`` (framework base classes: testing them means testing
    Rails), ``lib/**/templates/`` (generator templates), and everything outside app/ and lib/
    (config/, db/, bin/, spec/, test/, vendor/).
    Specs: ``app/<dir>/x.rb`` -> ``spec/<dir>/x_spec.rb``; ``<folder>/x.rb`` ->
    ``spec/<folder>/x_spec.rb``; ``lib/x/y.rb`` ->
    ``spec/lib/x/y_spec.rb`` (``spec/x/y_spec.rb``, the gem layout, also counts); a controller
    ``app/controllers/admin/users_controller.rb`` -> ``spec/requests/admin/users_spec.rb``, with
    ``spec/requests/admin/users_controller_spec.rb``,
    ``spec/controllers/admin/users_controller_spec.rb`` and the flattened
    ``spec/requests/admin_users_spec.rb`` also counting. Every ``*_spec.rb`` below
    the spec's stem directory (``spec/models/user/**/*_spec.rb``) belongs to the source too.
    A file under spec/ that holds examples but lacks the ``_spec.rb`` suffix is never loaded by
    RSpec (unless ``.rspec`` sets ``--pattern``): the mapping warns about it.

python-pytest
    ``tests/`` below stands for the project's test roots: pytest's ``testpaths`` when
    configured, else whichever of ``tests/``, ``test/``, ``testing/`` exist (the first one takes
    new tests). ``src/`` layout when any ``src/**.py`` exists (everything under src/), else the
    flat layout:
    top-level packages (directories with ``__init__.py``) and top-level modules. Skipped: tests/,
    test/, docs/, migrations/, ``conftest.py``, ``setup.py``, ``manage.py``, ``noxfile.py``,
    ``test_*.py``/``*_test.py``, and
    ``__init__.py`` files holding nothing but a docstring, imports, ``__all__``/``__version__``.
    A non-trivial ``pkg/__init__.py`` is treated as a module named ``pkg``. For ``pkg/sub/mod.py``
    these count as tests: ``tests/[<tail of pkg/sub>/]test_mod.py`` (also ``mod_test.py``),
    ``tests/test_[<tail>_]mod.py``, and ``tests/[<tail>/]mod/**/test_*.py``, where the tail is
    any trailing run of the package path (``sub``, ``pkg/sub``). Plural and singular forms count
    too (``tests/test_tables.py`` for ``table.py``), an exact name winning over them. A suite
    named after the project or its top-level package (``tests/test_tinydb.py``) belongs to the
    package's ``__init__`` when that is a source, else to the modules defining a class or
    function of that name (``class TinyDB``), else to the package's modules no other test
    names. Test files are the ones pytest collects: ``test_*.py``/``*_test.py`` by default, or
    the ``python_files`` patterns of the project's pytest configuration; a file under tests/
    that defines tests but matches no pattern is warned about. ``expected_spec`` mirrors the
    package tree when ``tests/`` already does (``tests/pkg/sub/test_mod.py`` if ``tests/pkg/``
    exists, ``tests/sub/test_mod.py`` if ``tests/sub/`` does), else ``tests/test_mod.py``;
    two sources that would share one new test file get ``tests/test_<pkg>_<sub>_mod.py`` instead.

Ties: when one spec matches several sources, only the most specific matches keep it (an exact
name beats a directory match; a longer mirrored package path beats a shorter one; the exact
spelling beats a plural or singular one), so
``spec/models/user/profile_spec.rb`` belongs to ``app/models/user/profile.rb`` when that exists.

Files come from ``git ls-files`` (tracked plus untracked-not-ignored) in a git work tree, else a
directory walk; both skip .git/, node_modules/, virtualenvs, caches and ``__pycache__`` at any
depth, and vendor/, tmp/, log/, coverage/ at the top level.
"""

from __future__ import annotations

import ast
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import get_args

from tasks.core.errors import BadInputError
from tasks.core.types import MappedFile, Mapping, SourceFile, SourceKind, ToolchainName
from tasks.keep.git_safe import GitError, TamperedWorktreeError, run_git
from tasks.toolchains.mapping_rules import (
    DEFAULT_PYTHON_FILES,
    is_py_test,
    other_numbers,
    project_suites,
    python_files_patterns,
    python_test_roots,
    unloaded_test_files,
)

log = logging.getLogger(__name__)

#: Skipped at any depth: tooling state, never source.
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", ".tox", ".bundle", "node_modules", "__pycache__", ".mypy_cache"}
    | {".pytest_cache", ".ruff_cache"}
)
#: Skipped at the top level only, so that e.g. ``app/services/log/`` stays a source directory.
SKIP_TOP_DIRS = frozenset({"vendor", "tmp", "log", "coverage"})
#: app/<dir> -> kind; the other app/ directories hold plain Ruby.
_RAILS_KINDS = {
    "models": SourceKind.MODEL,
    "serializers": SourceKind.SERIALIZER,
    "controllers": SourceKind.CONTROLLER,
    "mailers": SourceKind.MAILER,
    "helpers": SourceKind.HELPER,
}
_RAILS_SKIP = ("app/assets/", "app/views/", "app/javascript/", "app/channels/application_cable/")
_PY_SKIP_DIRS = frozenset({"tests", "test", "testing", "docs", "doc", "migrations"})
#: Top-level folders whose Ruby files are not sources (Rails', RSpec's and tooling's own).
_RUBY_NOT_SOURCE = frozenset(
    {"config", "db", "spec", "test", "features", "bin", "script", "public", "vendor", "tmp"}
    | {"log", "coverage", "storage", "node_modules", "doc", "docs", "sig"}
)

_PY_SKIP_FILES = frozenset({"conftest.py", "setup.py", "noxfile.py", "manage.py"})
_TOOLCHAINS: tuple[str, ...] = get_args(ToolchainName)

# A match score: (exact name?, length of the mirrored package path, exact spelling?). Higher wins.
_Score = tuple[int, int, int]


def detect_toolchain(repo: Path, override: str | None = None) -> ToolchainName:
    """The repository's toolchain: the override when given, else detected from its files.

    ruby-rspec needs a Gemfile and spec/; python-pytest needs pyproject.toml, setup.cfg or
    setup.py and tests/. When both match, ruby-rspec wins (pass an override for the other).

    Raises:
        BadInputError: the repository is not a directory, the override is unknown, or neither
            toolchain is recognised.
    """
    _check_repo(repo)
    if override is not None:
        if override not in _TOOLCHAINS:
            raise BadInputError(
                f"unknown toolchain {override!r} (expected one of {', '.join(_TOOLCHAINS)})"
            )
        return override  # type: ignore[return-value]
    ruby = (repo / "Gemfile").is_file() and (repo / "spec").is_dir()
    python = any((repo / n).is_file() for n in ("pyproject.toml", "setup.cfg", "setup.py")) and (
        (repo / python_test_roots(repo)[0]).is_dir()
    )
    if ruby:
        if python:
            log.info("%s: both ruby-rspec and python-pytest match; using ruby-rspec", repo)
        return "ruby-rspec"
    if python:
        return "python-pytest"
    raise BadInputError(
        f"{repo}: no toolchain detected (ruby-rspec needs Gemfile + spec/, python-pytest needs "
        "pyproject.toml/setup.cfg/setup.py + tests/, or pytest's testpaths); set "
        "AUTOPILOT_TOOLCHAIN to override"
    )


def list_files(repo: Path) -> list[str]:
    """Every file of the repository as sorted POSIX paths relative to it, minus skipped dirs.

    In a git work tree: tracked and untracked-but-not-ignored files (``.gitignore`` respected),
    so freshly generated specs count before they are committed. Elsewhere: a directory walk.
    """
    _check_repo(repo)
    files = _git_files(repo)
    if files is None:
        files = _walk_files(repo)
    return sorted(f for f in files if not _skipped(PurePosixPath(f).parts[:-1]))


def discover_sources(repo: Path, toolchain: ToolchainName) -> list[SourceFile]:
    """The testable source files of `repo` under `toolchain`'s rules, sorted by path."""
    return _discover(repo, toolchain, list_files(repo))


def map_repo(repo: Path, toolchain: str | None = None) -> Mapping:
    """Map every source file to its existing specs and the path a new spec would take.

    Args:
        repo: the repository root.
        toolchain: an explicit toolchain name; detected from the repository when None.

    Raises:
        BadInputError: see :func:`detect_toolchain`.
    """
    chosen = detect_toolchain(repo, toolchain)
    files = list_files(repo)
    python = chosen == "python-pytest"
    patterns = python_files_patterns(repo) if python else DEFAULT_PYTHON_FILES
    roots = python_test_roots(repo) if python else ["spec"]
    sources = _discover(repo, chosen, files, patterns)
    plans = [_python_plan(s.path, roots) if python else _ruby_plan(s.path) for s in sources]
    specs = _spec_files(files, chosen, patterns)
    if python:
        _python_expected(plans, files, roots[0])
    owners = _assign(plans, specs)
    if python:
        project_suites(repo, [s.path for s in sources], specs, owners, roots)
    mapped = [
        MappedFile(
            source=s.path,
            kind=s.kind,
            specs=sorted(owners.get(s.path, [])),
            expected_spec=p.expected,
        )
        for s, p in zip(sources, plans, strict=True)
    ]
    return Mapping(
        toolchain=chosen,
        files=mapped,
        untested=[m.source for m in mapped if not m.specs],
        warnings=unloaded_test_files(repo, chosen, files, specs, roots),
    )


def list_specs(repo: Path, toolchain: ToolchainName) -> list[str]:
    """Every test file of the repository: ``spec/**/*_spec.rb``, or the Python files pytest
    collects (``test_*.py``/``*_test.py``, or the configuration's ``python_files``)."""
    patterns = python_files_patterns(repo) if toolchain == "python-pytest" else DEFAULT_PYTHON_FILES
    return _spec_files(list_files(repo), toolchain, patterns)


def _spec_files(
    files: list[str], toolchain: ToolchainName, patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES
) -> list[str]:
    if toolchain == "ruby-rspec":
        return [f for f in files if f.startswith("spec/") and f.endswith("_spec.rb")]
    return [f for f in files if _is_py_test(f, patterns) and f.endswith(".py")]


# --- listing ---------------------------------------------------------------------------------


def _check_repo(repo: Path) -> None:
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")


def _git_files(repo: Path) -> list[str] | None:
    """Files git knows (tracked + untracked, not ignored), or None when not a git work tree.

    Through the hardened git of :mod:`tasks.keep.git_safe` (the tree may be a worktree the sandbox
    wrote to: a changed ``.git`` link there raises TamperedWorktreeError, never a fallback).
    """
    try:
        inside = run_git(["rev-parse", "--is-inside-work-tree"], cwd=repo, check=False, timeout=30)
        if inside.returncode != 0 or inside.stdout.strip() != b"true":
            return None
        # A project copied into an ignored directory of another repository: git would list
        # nothing, so the walk is the only honest listing.
        ignored = run_git(["check-ignore", "-q", "."], cwd=repo, check=False, timeout=30)
        if ignored.returncode == 0:
            return None
        listed = run_git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo)
    except TamperedWorktreeError:
        raise
    except GitError as exc:
        log.warning("%s: git ls-files failed (%s); walking the directory instead", repo, exc)
        return None
    # Paths are relative to `repo` even when it is a subdirectory of the work tree. Files
    # deleted from the work tree but still in the index are gone for our purposes.
    names = {n for n in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if n}
    return [n for n in names if (repo / n).is_file()]


def _skipped(dirs: tuple[str, ...]) -> bool:
    return bool(SKIP_DIRS.intersection(dirs)) or (bool(dirs) and dirs[0] in SKIP_TOP_DIRS)


def _walk_files(repo: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(repo):
        rel = Path(dirpath).relative_to(repo)
        dirnames[:] = [d for d in dirnames if not _skipped((*rel.parts, d))]
        out.extend(PurePosixPath(*rel.parts, f).as_posix() for f in filenames)
    return out


# --- sources ---------------------------------------------------------------------------------


def _discover(
    repo: Path,
    toolchain: ToolchainName,
    files: list[str],
    patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES,
) -> list[SourceFile]:
    if toolchain == "ruby-rspec":
        found = [(f, k) for f in files if (k := _ruby_kind(f)) is not None]
    else:
        found = [(f, SourceKind.PYTHON) for f in _python_sources(repo, files, patterns)]
    return [SourceFile(path=f, kind=k, toolchain=toolchain) for f, k in sorted(found)]


def _ruby_kind(path: str) -> SourceKind | None:
    parts = PurePosixPath(path).parts
    if not path.endswith(".rb") or len(parts) < 2 or parts[0] in _RUBY_NOT_SOURCE:
        return None
    if parts[0].startswith(".") or path.endswith("_spec.rb"):
        return None
    if parts[0] != "app":
        return None if "templates" in parts else SourceKind.RUBY
    if path.startswith(_RAILS_SKIP) or parts[-1].startswith("application_") or len(parts) < 3:
        return None
    if "concerns" in parts:
        return SourceKind.RUBY
    return _RAILS_KINDS.get(parts[1], SourceKind.RUBY)


def _python_sources(
    repo: Path, files: list[str], patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES
) -> list[str]:
    py = [f for f in files if f.endswith(".py")]
    if any(f.startswith("src/") for f in py):
        candidates = [f for f in py if f.startswith("src/")]
    else:
        packages = {
            PurePosixPath(f).parts[0]
            for f in py
            if f.count("/") == 1 and f.endswith("/__init__.py")
        }
        candidates = [f for f in py if "/" not in f or PurePosixPath(f).parts[0] in packages]
    # A package __init__ at the root of the tree has no module name to map from.
    candidates = [f for f in candidates if f not in ("__init__.py", "src/__init__.py")]
    return [f for f in candidates if _is_py_source(repo, f, patterns)]


def _is_py_source(repo: Path, path: str, patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if _PY_SKIP_DIRS.intersection(parts[:-1]) or name in _PY_SKIP_FILES:
        return False
    if _is_py_test(path, patterns) or _is_py_test(path):
        return False
    return name != "__init__.py" or not _trivial_init(repo / path)


def _is_py_test(path: str, patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES) -> bool:
    return is_py_test(path, patterns)


def _trivial_init(path: Path) -> bool:
    """True for an ``__init__.py`` with only a docstring, imports, ``__all__``/``__version__``
    (also inside ``if TYPE_CHECKING:`` or ``try/except ImportError`` blocks)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError) as exc:
        log.info("%s: cannot parse (%s); kept as a source", path, exc)
        return False
    return all(_only_imports(node) for node in tree.body)


def _only_imports(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import | ast.ImportFrom | ast.Pass):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return all(isinstance(t, ast.Name) and t.id in ("__all__", "__version__") for t in targets)
    if isinstance(node, ast.If):
        return all(_only_imports(n) for n in (*node.body, *node.orelse))
    if isinstance(node, ast.Try):
        blocks = (
            *node.body,
            *node.orelse,
            *node.finalbody,
            *(s for h in node.handlers for s in h.body),
        )
        return all(_only_imports(n) for n in blocks)
    return False


# --- specs -----------------------------------------------------------------------------------


@dataclass
class _Plan:
    """Where the specs of one source may live, and where a new one goes."""

    source: str
    expected: str
    exact: dict[str, _Score] = field(default_factory=dict)
    dirs: dict[str, _Score] = field(default_factory=dict)  # "spec/models/user/" -> score
    # Python only: the module name and its package path, for the expected-path decision.
    module: str = ""
    package: tuple[str, ...] = ()


def _ruby_plan(source: str) -> _Plan:
    parts = PurePosixPath(source).with_suffix("").parts
    if parts[0] != "app":
        stems = ["spec/" + "/".join(parts), "spec/" + "/".join(parts[1:])]
    elif parts[1] == "controllers" and "concerns" not in parts:
        rest = "/".join(parts[2:])
        short = rest.removesuffix("_controller")
        stems = [f"spec/requests/{short}", f"spec/requests/{rest}", f"spec/controllers/{rest}"]
        if "/" in short:  # a namespace flattened into the name: spec/requests/admin_users_spec.rb
            stems.append(f"spec/requests/{short.replace('/', '_')}")
    else:
        stems = ["spec/" + "/".join(parts[1:])]
    plan = _Plan(source=source, expected=f"{stems[0]}_spec.rb")
    for stem in stems:
        plan.exact.setdefault(f"{stem}_spec.rb", (1, 0, 1))
        plan.dirs.setdefault(f"{stem}/", (0, 0, 1))
    return plan


def _python_plan(source: str, roots: list[str] | None = None) -> _Plan:
    parts = PurePosixPath(source).with_suffix("").parts
    if parts[0] == "src":
        parts = parts[1:]
    is_init = parts[-1] == "__init__"
    if is_init:
        parts = parts[:-1]
    module, package = parts[-1], tuple(parts[:-1])
    plan = _Plan(source=source, expected="", module=module, package=package)
    for root in roots or ["tests"]:
        for start in range(len(package) + 1):
            tail = package[start:]
            score = (1, len(tail), 1)
            folder = "".join(f"{p}/" for p in tail)
            for name in (f"test_{module}.py", f"{module}_test.py"):
                plan.exact.setdefault(f"{root}/{folder}{name}", score)
            plan.exact.setdefault(f"{root}/test_{'_'.join((*tail, module))}.py", score)
            for other in other_numbers(module):
                plan.exact.setdefault(f"{root}/{folder}test_{other}.py", (1, len(tail), 0))
            if not is_init:
                plan.dirs.setdefault(f"{root}/{folder}{module}/", (0, len(tail), 1))
    return plan


def _python_expected(plans: list[_Plan], files: list[str], root: str = "tests") -> None:
    """Fill in expected paths: mirrored when the test root mirrors the package, unique per
    source."""
    test_dirs = {str(PurePosixPath(f).parent) for f in files if f.startswith(f"{root}/")}
    test_dirs |= {str(p) for d in list(test_dirs) for p in PurePosixPath(d).parents}
    for plan in plans:
        plan.expected = f"{root}/test_{plan.module}.py"
        for start in range(len(plan.package)):
            if f"{root}/{plan.package[start]}" in test_dirs:
                tail = "/".join(plan.package[start:])
                plan.expected = f"{root}/{tail}/test_{plan.module}.py"
                break
    taken: dict[str, list[_Plan]] = {}
    for plan in plans:
        taken.setdefault(plan.expected, []).append(plan)
    for clash in (group for group in taken.values() if len(group) > 1):
        for plan in clash:
            plan.expected = f"{root}/test_{'_'.join((*plan.package, plan.module))}.py"


def _assign(plans: Iterable[_Plan], specs: list[str]) -> dict[str, list[str]]:
    """Give each spec to the sources that match it best (see the module docstring on ties)."""
    exact: dict[str, list[tuple[_Score, str]]] = {}
    dirs: dict[str, list[tuple[_Score, str]]] = {}
    for plan in plans:
        for path, score in plan.exact.items():
            exact.setdefault(path, []).append((score, plan.source))
        for prefix, score in plan.dirs.items():
            dirs.setdefault(prefix, []).append((score, plan.source))
    owners: dict[str, list[str]] = {}
    for spec in sorted(specs):
        matches = list(exact.get(spec, []))
        for parent in PurePosixPath(spec).parents:
            matches.extend(dirs.get(f"{parent}/", []))
        if not matches:
            continue
        best = max(score for score, _ in matches)
        for source in sorted({src for score, src in matches if score == best}):
            owners.setdefault(source, []).append(spec)
    return owners
