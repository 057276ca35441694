"""Which files of a Python project are sources, tests and support, and where a new test goes
(the contract; tests/tasks/toolchains/test_mapping.py exercises each rule).

``tests/`` below stands for the project's test roots: pytest's ``testpaths`` when
configured, else whichever of ``tests/``, ``test/``, ``testing/`` exist (the first one takes
new tests), else the test directories inside its top-level packages (``pkg/tests/``) and
top-level directories named after a package (``pkg_tests/``). ``src/`` layout when any
``src/**.py`` exists (everything under src/), else the flat layout: top-level packages
(directories with ``__init__.py``) and top-level modules. Skipped: tests/, test/, docs/,
migrations/, ``conftest.py``, ``setup.py``, ``manage.py``, ``noxfile.py``, ``hatch_build.py``,
``test_*.py``/``*_test.py``, what the project's coverage configuration does not measure
(outside its ``source``, or omitted), and ``__init__.py`` files holding nothing but a
docstring, imports, ``__all__``/``__version__``.
A non-trivial ``pkg/__init__.py`` is treated as a module named ``pkg``. For ``pkg/sub/mod.py``
these count as tests: ``tests/[<tail of pkg/sub>/]test_mod.py`` (also ``mod_test.py``),
``tests/test_[<tail>_]mod.py``, and ``tests/[<tail>/]mod/**/test_*.py``, where the tail is
any trailing run of the package path (``sub``, ``pkg/sub``); the same inside the package
(``pkg/tests/``, ``pkg/sub/tests/``, also ``test/``, ``_tests/``, ``testing/``). Plural and
singular forms count too (``tests/test_tables.py`` for ``table.py``), and a private name
under its public one (``tests/test_base.py`` for ``_base.py``, ``tests/impl/`` for
``_impl/``), an exact name winning over them. A non-trivial package ``__init__`` also owns
``tests/[<tail>/]<pkg>/test__init__.py`` (the top package's: ``tests/test__init__.py``) and,
below every module of the package, the test files in its folder that no module's name takes.
A test file no name matches is tried under other spellings: its folders without a test
affix (``tests/test_pkg/test_x.py`` as ``tests/pkg/test_x.py``), then its name less trailing
words (``test_x_trace.py`` as ``test_x.py``), the longest first. A suite
named after the project or its top-level package (``tests/test_tinydb.py``) belongs to the
package's ``__init__`` when that is a source, else to the modules defining a class or
function of that name (``class TinyDB``), else to the package's modules no other test
names. Test files are the ones pytest collects: ``test_*.py``/``*_test.py`` by default, or
the ``python_files`` patterns of the project's pytest configuration; a file under tests/
that defines tests but matches no pattern is warned about. ``expected_spec`` mirrors the
package tree when ``tests/`` already does (``tests/pkg/sub/test_mod.py`` if ``tests/pkg/``
exists, ``tests/sub/test_mod.py`` if ``tests/sub/`` does), else ``tests/test_mod.py``;
two sources that would share one new test file get ``tests/test_<pkg>_<sub>_mod.py`` instead.
"""

from __future__ import annotations

import ast
import logging
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tasks.toolchains.files import FileRules, SpecPlan
from tasks.toolchains.python.coverage_config import coverage_config
from tasks.toolchains.python.parse import parse
from tasks.toolchains.python.pytest_config import (
    DEFAULT_PYTHON_FILES,
    IN_PACKAGE_TESTS,
    is_py_test,
    python_files_patterns,
    python_test_roots,
    without_test_affix,
)

log = logging.getLogger(__name__)

#: Python sources are of one kind (one skill: python-module).
KINDS = ("python",)
_PY_SKIP_DIRS = frozenset({"tests", "test", "testing", "docs", "doc", "migrations"})
_PY_SKIP_FILES = frozenset(
    {"conftest.py", "setup.py", "noxfile.py", "manage.py", "hatch_build.py", "pdm_build.py"}
)
_DEFINES_TESTS = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+Test", re.MULTILINE)


@dataclass
class PythonPlan(SpecPlan):
    """A spec plan with the module name and its package path (for the new test's path)."""

    module: str = ""
    package: tuple[str, ...] = ()


class PythonFileRules(FileRules):
    """pytest's files in a Python project: what its configuration collects, under its test
    roots; conftest.py files are the shared support."""

    def __init__(self, repo: Path) -> None:
        super().__init__(repo)
        self.patterns = python_files_patterns(repo)
        self.test_roots = python_test_roots(repo)
        self.coverage = coverage_config(repo)

    def is_test_file(self, path: str) -> bool:
        return is_py_test(path, self.patterns)

    def is_support_file(self, path: str) -> bool:
        return PurePosixPath(path).name == "conftest.py"

    def sources(self, files: list[str]) -> list[tuple[str, str]]:
        # What the project's coverage configuration leaves out (vendored code, build
        # scripts outside its `source`) is not the project's code to test.
        found = python_sources(self.repo, files, self.patterns)
        return sorted((f, "python") for f in found if self.coverage.measures(self.repo, f))

    def plan(self, source: str) -> SpecPlan:
        return spec_plan(source, self.test_roots)

    def finish_plans(self, plans: list[SpecPlan], files: list[str]) -> None:
        expected_paths([p for p in plans if isinstance(p, PythonPlan)], files, self.test_roots[0])

    def aliases(self, spec: str) -> list[str]:
        return spec_aliases(spec)

    def claim(self, sources: list[str], specs: list[str], owners: dict[str, list[str]]) -> None:
        project_suites(self.repo, sources, specs, owners, self.test_roots)

    def warnings(self, files: list[str], specs: list[str]) -> list[str]:
        """Files under the test roots that define tests pytest does not collect."""
        taken = set(specs)
        warnings: list[str] = []
        for path in files:
            name = PurePosixPath(path).name
            inside = any(
                path.startswith(f"{root}/") for root in self.test_roots or ["tests", "test"]
            )
            if path in taken or not inside or name in ("conftest.py", "__init__.py"):
                continue
            if path.endswith(".py") and _matches(self.repo, path, _DEFINES_TESTS):
                warnings.append(
                    f"{path}: defines tests but pytest does not collect it (its name matches no "
                    "python_files pattern: test_*.py or *_test.py by default)"
                )
        return warnings


def python_sources(
    repo: Path, files: list[str], patterns: tuple[str, ...] = DEFAULT_PYTHON_FILES
) -> list[str]:
    """The Python sources among `files` (see the module docstring)."""
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
    if is_py_test(path, patterns) or is_py_test(path):
        return False
    return name != "__init__.py" or not _trivial_init(repo / path)


def _trivial_init(path: Path) -> bool:
    """True for an ``__init__.py`` with only a docstring, imports, ``__all__``/``__version__``
    (also inside ``if TYPE_CHECKING:`` or ``try/except ImportError`` blocks)."""
    try:
        tree = parse(path.read_bytes())
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


def spec_plan(source: str, roots: list[str] | None = None) -> PythonPlan:
    """Where the tests of `source` may be (see the module docstring); the new test's path is
    settled by :func:`expected_paths` once every source is planned."""
    parts = PurePosixPath(source).with_suffix("").parts
    top = ("src",) if parts[0] == "src" else ()
    parts = parts[len(top) :]
    is_init = parts[-1] == "__init__"
    if is_init:
        parts = parts[:-1]
    module, package = parts[-1], tuple(parts[:-1])
    plan = PythonPlan(source=source, expected="", module=module, package=package)
    trees = [(root, package) for root in roots or ["tests"]]
    trees += [
        ("/".join((*top, *package[:depth], name)), package[depth:])
        for depth in range(len(package), 0, -1)
        for name in IN_PACKAGE_TESTS
    ]
    for root, below in trees:
        _plan_tree(plan, root, below, module, is_init)
    return plan


def _plan_tree(
    plan: PythonPlan, root: str, package: tuple[str, ...], module: str, is_init: bool
) -> None:
    """The test paths of one test tree for `module` in `package` (relative to the tree)."""
    names = [module, *([module.lstrip("_")] if module.lstrip("_") not in ("", module) else [])]
    for start in range(len(package) + 1):
        tail = package[start:]
        public = tuple(p.lstrip("_") or p for p in tail)
        for spelled_tail in dict.fromkeys((tail, public)):
            folder = "".join(f"{p}/" for p in spelled_tail)
            for name in names:
                exact = int(name == module and spelled_tail == tail)
                score = (1, len(tail), exact)
                for file in (f"test_{name}.py", f"{name}_test.py"):
                    plan.exact.setdefault(f"{root}/{folder}{file}", score)
                plan.exact.setdefault(f"{root}/test_{'_'.join((*spelled_tail, name))}.py", score)
                for other in other_numbers(name):
                    plan.exact.setdefault(f"{root}/{folder}test_{other}.py", (1, len(tail), 0))
                # A package's own tests may sit in its folder under any name, ranked below
                # every module of the package (an exact spelling of theirs wins).
                plan.dirs.setdefault(f"{root}/{folder}{name}/", (0, len(tail), exact - is_init))
                if is_init:
                    for file in ("test__init__.py", "test___init__.py"):
                        plan.exact.setdefault(f"{root}/{folder}{name}/{file}", score)
                        if not package:  # the top package's, at the root of its tests
                            plan.exact.setdefault(f"{root}/{file}", score)


def spec_aliases(spec: str) -> list[str]:
    """Other spellings of a test file's path, tried when the path matches no source: its
    folders without a test affix (``tests/test_pkg/`` as ``tests/pkg/``), then its name less
    trailing words (``test_x_trace.py``, ``test_x_fb.py`` as ``test_x.py``: more test files
    of one module), the longest first."""
    path = PurePosixPath(spec)
    folders = path.parts[:-1]
    forms = list(dict.fromkeys([folders, tuple(without_test_affix(f) for f in folders)]))
    stem = path.stem
    words = stem.removeprefix("test_").removesuffix("_test").split("_")
    styled = "test_{}.py" if stem.startswith("test_") else "{}_test.py"
    names = [path.name]
    if stem.startswith("test_") or stem.endswith("_test"):
        names += [styled.format("_".join(words[:n])) for n in range(len(words) - 1, 0, -1)]
    found = [PurePosixPath(*f, n).as_posix() for n in names for f in forms]
    return [f for f in found if f != spec]


def expected_paths(plans: list[PythonPlan], files: list[str], root: str = "tests") -> None:
    """Fill in expected paths: mirrored when the test root mirrors the package, a private
    module under its public name (``test_base.py`` for ``_base.py``), unique per source."""
    test_dirs = {str(PurePosixPath(f).parent) for f in files if f.startswith(f"{root}/")}
    test_dirs |= {str(p) for d in list(test_dirs) for p in PurePosixPath(d).parents}
    for plan in plans:
        name = plan.module.lstrip("_") or plan.module
        plan.expected = f"{root}/test_{name}.py"
        public = tuple(p.lstrip("_") or p for p in plan.package)
        found = (
            "/".join(parts[start:])
            for start in range(len(plan.package))
            for parts in (plan.package, public)
            if f"{root}/{parts[start]}" in test_dirs
        )
        if (tail := next(found, None)) is not None:
            plan.expected = f"{root}/{tail}/test_{name}.py"
    taken: dict[str, list[PythonPlan]] = {}
    for plan in plans:
        taken.setdefault(plan.expected, []).append(plan)
    for clash in (group for group in taken.values() if len(group) > 1):
        for plan in clash:
            plan.expected = f"{root}/test_{'_'.join((*plan.package, plan.module))}.py"


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


# --- suites named after the project -----------------------------------------------------------


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
        tree = parse((repo / source).read_bytes())
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


def _matches(repo: Path, path: str, pattern: re.Pattern[str]) -> bool:
    try:
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return pattern.search(text) is not None
