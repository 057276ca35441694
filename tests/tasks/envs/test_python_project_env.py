"""What a Python project's prepared environment holds (issue 24), built for real (uv, the
package index, the install sandbox) and run by the python-pytest toolchain in bwrap: the test
dependency groups without a uv.lock, the project's own metadata with a version from git, and
an older coverage.py read as its own report reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.types import ValidationResult
from tasks.envs import PreparedEnv, prepare_environment
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import SuiteResult
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git
from tests.field_repos import make_repo, write_tree

pytestmark = pytest.mark.slow
PYTHON = get_toolchain("python-pytest").env_builder()


def _suite(project: Path, env: PreparedEnv) -> SuiteResult:
    tc = get_toolchain("python-pytest", python=env.interpreter, home=Path(env.path).parents[1])
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=180),
        project,
        toolchain_dirs=env.needs(project).dirs,
    )
    return tc.run_suite(project, runner)


def _passed(result: ValidationResult) -> list[str]:
    return sorted(e.id for e in result.examples if e.status == "passed")


def _has(env: PreparedEnv, module: str) -> bool:
    assert env.interpreter is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([env.interpreter, "-c", probe], cwd="/").returncode == 0


GROUPS = {
    "pyproject.toml": (
        '[project]\nname = "clock"\nversion = "0.3"\nrequires-python = ">=3.11"\n\n'
        "[dependency-groups]\n"
        'test = ["pytest>=8", {include-group = "async"}]\n'
        'async = ["pytest-asyncio>=0.24"]\n'
        'docs = ["sphinx"]\n'
        'dev = [{include-group = "test"}, {include-group = "docs"}]\n\n'
        "[tool.pytest.ini_options]\n"
        'addopts = "--strict-config"\nasyncio_mode = "auto"\n'
        'asyncio_default_fixture_loop_scope = "function"\n'
    ),
    "src/clock/__init__.py": "async def tick(n):\n    return n + 1\n",
    "tests/test_clock.py": (
        "from clock import tick\n\n\nasync def test_tick():\n    assert await tick(1) == 2\n"
    ),
}


def test_test_groups_are_installed_without_a_uv_lock(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "clock", GROUPS)
    env = prepare_environment(project, PYTHON, home=tmp_path / "home")
    assert isinstance(env, PreparedEnv), env
    record = json.loads((Path(env.path) / ".autopilot" / "env.json").read_text())
    assert any("--group test" in c for c in record["commands"]), record["commands"]
    # The test group and the group it includes; not the docs that `dev` would bring.
    assert _has(env, "pytest_asyncio") and not _has(env, "sphinx")
    suite = _suite(project, env)
    assert suite.ran, suite.validation.problem
    assert _passed(suite.validation) == ["tests/test_clock.py::test_tick"]


VERSIONED = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n'
        'build-backend = "hatchling.build"\n\n'
        '[project]\nname = "vpkg"\ndynamic = ["version"]\nrequires-python = ">=3.11"\n\n'
        '[project.scripts]\nvpkg-hello = "vpkg:hello"\n\n'
        '[dependency-groups]\ntest = ["pytest"]\n\n'
        '[tool.hatch.version]\nsource = "vcs"\n\n'
        '[tool.hatch.build.hooks.vcs]\nversion-file = "src/vpkg/_version.py"\n'
    ),
    ".gitignore": "src/vpkg/_version.py\n",
    "src/vpkg/__init__.py": (
        "from ._version import version as __version__\n\n\ndef hello():\n    return 'hello'\n"
    ),
    "tests/test_meta.py": (
        "import importlib.metadata\n\nimport vpkg\n\n\n"
        "def test_installed_version_is_the_worktrees():\n"
        "    assert importlib.metadata.version('vpkg') == vpkg.__version__\n"
        "    assert vpkg.__version__.startswith('1.2.1.dev1+g')\n\n\n"
        "def test_hello():\n    assert vpkg.hello() == 'hello'\n"
    ),
}


def test_the_project_is_installed_as_an_editable_install_has_it(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "vpkg", VERSIONED)
    git(project, "tag", "v1.2.0")
    write_tree(project, {"README.md": "vpkg\n"})
    git(project, "add", "-A")
    git(project, "commit", "-qm", "after the tag")
    home = tmp_path / "home"
    env = prepare_environment(project, PYTHON, home=home)
    assert isinstance(env, PreparedEnv), env
    assert "(project version from git)" in env.inputs
    (line,) = env.extra["project"]
    assert line.startswith("vpkg 1.2.1.dev1+g") and line.endswith("the code is the worktree's")
    # Its metadata and console script are there; its code is not (the worktree's is used).
    assert env.interpreter is not None
    meta = "import importlib.metadata as m; print(m.version('vpkg'))"
    shown = subprocess.run([env.interpreter, "-c", meta], capture_output=True, text=True, cwd="/")
    assert shown.stdout.startswith("1.2.1.dev1+g"), shown.stderr
    assert not _has(env, "vpkg") and (Path(env.interpreter).parent / "vpkg-hello").is_file()

    suite = _suite(project, env)
    assert suite.ran, suite.validation.problem
    assert len(_passed(suite.validation)) == 2

    # A second worktree sharing the environment imports its own code.
    other = tmp_path / "other"
    git(project, "worktree", "add", "-q", "--detach", str(other))
    (other / "src/vpkg/__init__.py").write_text(
        VERSIONED["src/vpkg/__init__.py"].replace("'hello'", "'changed'")
    )
    again = prepare_environment(other, PYTHON, home=home)
    assert isinstance(again, PreparedEnv) and again.path == env.path and not again.built
    changed = _suite(other, again)
    failed = [e.id for e in changed.validation.examples if e.status == "failed"]
    assert failed == ["tests/test_meta.py::test_hello"]

    # Another commit gives another version: another environment.
    write_tree(project, {"NEWS.md": "more\n"})
    git(project, "add", "-A")
    git(project, "commit", "-qm", "two after the tag")
    later = prepare_environment(project, PYTHON, home=home)
    assert isinstance(later, PreparedEnv) and later.name != env.name


OLD_COVERAGE = {
    "pyproject.toml": '[project]\nname = "zoo"\nversion = "1.0"\nrequires-python = ">=3.11"\n',
    "requirements-test.txt": "coverage==7.2.7\npytest\n",
    "src/zoo/__init__.py": '"""The zoo."""\n',
    "src/zoo/animals.py": (
        'class Animal:\n    """An animal.\n\n    It has a name.\n    """\n\n    legs = 4\n\n'
        '    def __init__(self, name):\n        """Name it."""\n        self.name = name\n\n'
        "    def speak(self):\n        return '...'\n\n\n"
        'class Bird(Animal):\n    """Two legs."""\n\n    legs = 2\n\n'
        "    def speak(self):\n        if self.name == 'owl':\n            return 'hoo'\n"
        "        return 'tweet'\n"
    ),
    "src/zoo/keeper.py": (
        '"""Feeding."""\n\n\nclass Keeper:\n    """Feeds animals."""\n\n'
        "    def feed(self, animal):\n        return f'{animal.name} fed'\n\n\n"
        "def unused():\n    return None\n"
    ),
    "tests/test_animals.py": (
        "from zoo.animals import Bird\nfrom zoo.keeper import Keeper\n\n\n"
        "def test_bird():\n    assert Bird('tit').speak() == 'tweet'\n"
        "    assert Keeper().feed(Bird('tit')) == 'tit fed'\n"
    ),
}


def test_an_older_coverage_py_reads_as_its_own_report(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "zoo", OLD_COVERAGE)
    env = prepare_environment(project, PYTHON, home=tmp_path / "home")
    assert isinstance(env, PreparedEnv) and env.interpreter is not None, env
    version = [env.interpreter, "-c", "import coverage; print(coverage.__version__)"]
    assert subprocess.run(version, capture_output=True, text=True).stdout.strip() == "7.2.7"
    suite = _suite(project, env)
    assert suite.ran, suite.validation.problem
    # coverage.py's own figures, from a run by hand with the same interpreter.
    cov = [env.interpreter, "-m", "coverage"]
    run = [*cov, "run", "--source=src", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    hand = {"PYTHONPATH": str(project / "src"), "PATH": "/usr/bin:/bin"}
    subprocess.run(run, cwd=project, check=True, capture_output=True, env=hand)
    subprocess.run([*cov, "json", "-o", "own.json"], cwd=project, check=True, capture_output=True)
    own = json.loads((project / "own.json").read_text())
    assert own["meta"]["version"] == "7.2.7"
    for path, entry in own["files"].items():
        ours = suite.files[path]
        assert ours.ratio * 100 == pytest.approx(entry["summary"]["percent_covered"]), path
        assert ours.uncovered_lines == entry["missing_lines"], path
    # The docstrings ran but are not statements: 7.2.7 lists them among the executed lines.
    animals = own["files"]["src/zoo/animals.py"]
    assert len(animals["executed_lines"]) > animals["summary"]["covered_lines"]
