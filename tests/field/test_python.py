"""Field cases of real Python projects, reproduced with small repositories and real tools
(pytest, coverage.py, pytest-cov, pytest-benchmark, git, bubblewrap): the audit runs the suite
as the maintainers do and reports coverage.py's own numbers, or exits 1 with the real cause in
one line; never a pass at 0 %."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.audit.report import AuditReport
from tasks.audit.run import audit_repo
from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git
from tests.field_repos import editable_install, make_repo, project_venv, site_packages, write_tree

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))

CALC = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "1.0"\n',
    "src/calc/__init__.py": "VALUE = 2\n",
    "src/calc/ops.py": (
        "def add(a, b):\n    return a + b\n\n\n"
        "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError('b')\n    return a / b\n"
    ),
    "src/calc/fmt.py": "def show(x):\n    return f'<{x}>'\n\n\ndef unused():\n    return None\n",
    "tests/test_ops.py": (
        "from calc.ops import add, div\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_div():\n    assert div(4, 2) == 2\n"
    ),
    "tests/test_fmt.py": (
        "from calc.fmt import show\n\n\ndef test_show():\n    assert show(1) == '<1>'\n"
    ),
}
PYTEST_COV_INI = (
    "[pytest]\naddopts = --cov=calc --cov-report=term-missing --cov-fail-under=99 -p no:randomly\n"
)


@pytest.fixture
def project_python(tmp_path: Path) -> Path:
    """A fresh project virtualenv (pytest, coverage, pytest-cov, pytest-benchmark)."""
    return project_venv(tmp_path / "venv")


def _audit(repo: Path, monkeypatch: pytest.MonkeyPatch, python: Path | None = None) -> AuditReport:
    if python is not None:
        monkeypatch.setenv("AUTOPILOT_PYTHON", str(python))
    return audit_repo(repo)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [AUTOPILOT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean, **(env or {})},
    )


@pytest.mark.slow
def test_pytest_cov_in_addopts_gives_coverage_pys_own_numbers(
    tmp_path: Path, project_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "calc", {**CALC, "pytest.ini": PYTEST_COV_INI})
    editable_install(project_python, "calc", repo / "src", "pth")
    # The maintainers' own run: pytest-cov, with their options (it fails their 99 % bar).
    own_json = tmp_path / "own.json"
    own = subprocess.run(
        [
            str(project_python),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--cov-report=json:{own_json}",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert "Required test coverage of 99% not reached" in own.stdout, own.stdout
    theirs = json.loads(own_json.read_text())["files"]

    report = _audit(repo, monkeypatch, project_python)

    assert report.suite.ran, report.suite.problem
    assert report.summary.tests.model_dump(exclude={"duration"}) == {
        "tests": 3,
        "passed": 3,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "duplicates": 0,
    }
    by = {f.source: f for f in report.files}
    for source in ("src/calc/ops.py", "src/calc/fmt.py"):
        expected = theirs[source]["summary"]["percent_covered"]
        assert abs(by[source].coverage * 100 - expected) <= 0.5, (source, by[source].coverage)
    assert by["src/calc/ops.py"].uncovered_lines == theirs["src/calc/ops.py"]["missing_lines"]
    assert report.exit_code() == 0


@pytest.mark.slow
def test_without_the_projects_interpreter_its_plugin_options_are_one_clear_line(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "calc", {**CALC, "pytest.ini": PYTEST_COV_INI})
    done = _cli("audit", "--repo", str(repo), "--json")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "autopilot: suite did not run: pytest: unrecognized arguments: --cov=calc"
    )
    assert "set `python` in autopilot.toml" in lines[0]
    doc = json.loads(done.stdout)
    assert doc["suite"]["ran"] is False
    assert doc["suite"]["problem"]["cause"] == "environment"
    assert doc["summary"]["specs_passing"] == 0
    assert all(f["status"] != "tested" for f in doc["files"])


@pytest.mark.slow
def test_a_plugin_fixture_works_with_the_projects_interpreter(
    tmp_path: Path, project_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = (
        "from calc.ops import add\n\n\ndef test_add_speed(benchmark):\n"
        "    assert benchmark(add, 1, 2) == 3\n"
    )
    repo = make_repo(tmp_path / "calc", {**CALC, "tests/test_speed.py": bench})
    report = _audit(repo, monkeypatch, project_python)
    assert report.suite.ran and report.summary.tests.passed == 4
    # Autopilot's own, isolated interpreter has no plugins: the fixture is missing, and says so.
    monkeypatch.delenv("AUTOPILOT_PYTHON")
    isolated = audit_repo(repo)
    assert isolated.suite.ran and isolated.summary.tests.errors == 1
    suite = get_toolchain("python-pytest").run_suite(
        repo, make_runner(SandboxSettings(backend="bwrap"), root=repo)
    )
    (error,) = [e for e in suite.validation.examples if e.status == "error"]
    assert "fixture 'benchmark' not found" in (error.trace or error.message or "")


@pytest.mark.slow
@pytest.mark.parametrize("style", ["pth", "finder", "egg"])
def test_the_worktrees_code_wins_over_an_editable_install_of_the_checkout(
    tmp_path: Path, project_python: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    test = "from calc import VALUE\n\n\ndef test_value():\n    assert VALUE == 2\n"
    repo = make_repo(tmp_path / "calc", {**CALC, "tests/test_value.py": test})
    editable_install(project_python, "calc", repo / "src", style)
    # The user's checkout has moved on (an uncommitted edit); the audited commit has VALUE = 2.
    (repo / "src/calc/__init__.py").write_text("VALUE = 1\n")
    report = _audit(repo, monkeypatch, project_python)
    assert report.suite.ran, report.suite.problem
    assert report.summary.tests.failed == 0 and report.summary.tests.passed == 4


@pytest.mark.slow
def test_a_change_in_the_worktree_is_what_the_tests_exercise(
    tmp_path: Path, project_python: Path
) -> None:
    test = "from calc import VALUE\n\n\ndef test_value():\n    assert VALUE == 3\n"
    checkout = make_repo(tmp_path / "calc", {**CALC, "tests/test_value.py": test})
    editable_install(project_python, "calc", checkout / "src", "finder")
    worktree = tmp_path / "wt"
    git(checkout, "worktree", "add", "-q", "--detach", str(worktree))
    chain = get_toolchain("python-pytest", python=str(project_python))
    runner = make_runner(SandboxSettings(backend="bwrap"), root=worktree)
    before = chain.run_specs(worktree, ["tests/test_value.py"], None, runner)
    assert before.loaded and not before.passed  # VALUE is 2 at the commit
    # A change made in the worktree (as a patch or a generated test would be) is what runs,
    # while the checkout, which the editable install points at, still says 2.
    (worktree / "src/calc/__init__.py").write_text("VALUE = 3\n")
    after = chain.run_specs(worktree, ["tests/test_value.py"], "src/calc/__init__.py", runner)
    assert after.passed, after.load_error
    assert (checkout / "src/calc/__init__.py").read_text() == "VALUE = 2\n"


@pytest.mark.slow
def test_a_package_imported_from_outside_the_worktree_is_caught(
    tmp_path: Path, project_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "calc", CALC)
    # A stale installed copy, and a start-up hook that imports it before anything else runs.
    site = site_packages(project_python)
    write_tree(site / "stale", {"calc/__init__.py": "VALUE = 0\n"})
    (site / "zz_preload.pth").write_text(
        f"import sys; sys.path.insert(0, {str(site / 'stale')!r}); import calc\n"
    )
    report = _audit(repo, monkeypatch, project_python)
    assert report.suite.ran is False
    problem = report.suite.problem
    assert problem is not None and problem.cause == "environment"
    assert problem.message == (
        f"the tests imported calc from {site}/stale/calc/__init__.py, not from the worktree"
    )


@pytest.mark.slow
def test_autopilots_own_packages_never_satisfy_a_project_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        **CALC,
        # A project package named like one of Autopilot's own dependencies.
        "src/rich/__init__.py": "WHO = 'the project'\n",
        "tests/test_rich.py": (
            "import rich\n\n\ndef test_who():\n    assert rich.WHO == 'the project'\n"
        ),
        "tests/test_yaml.py": "import yaml\n\n\ndef test_dump():\n    assert yaml.safe_dump(1)\n",
    }
    repo = make_repo(tmp_path / "calc", files)
    report = _audit(repo, monkeypatch)
    assert report.suite.ran
    assert report.suite.set_aside == {
        "tests/test_yaml.py": "did not load: ModuleNotFoundError: No module named 'yaml'"
    }
    by = {f.source: f for f in report.files}
    assert by["src/rich/__init__.py"].status == "tested"
    assert report.summary.tests.passed == 4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "path", "expect"),
    [
        (
            '[tool.setuptools_scm]\nversion_file = "src/vpkg/_version.py"\n',
            "src/vpkg/_version.py",
            "from ._version import version as __version__\n",
        ),
        (
            '[tool.hatch.build.hooks.vcs]\nversion-file = "src/vpkg/_about.py"\n'
            'template = "VERSION = {version!r}\\n"\n',
            "src/vpkg/_about.py",
            "from ._about import VERSION as __version__\n",
        ),
    ],
)
def test_a_version_file_made_at_install_time_is_generated_in_the_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, path: str, expect: str
) -> None:
    files = {
        "pyproject.toml": f'[project]\nname = "vpkg"\ndynamic = ["version"]\n\n{config}',
        ".gitignore": f"{path}\n",
        "src/vpkg/__init__.py": expect,
        "tests/test_version.py": (
            "import vpkg\n\n\ndef test_version():\n"
            "    assert vpkg.__version__.startswith('1.4.1.dev1+g')\n"
        ),
    }
    repo = make_repo(tmp_path / "vpkg", files)
    git(repo, "tag", "v1.4.0")
    write_tree(repo, {"README.md": "vpkg\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "after the tag")
    sha = git(repo, "rev-parse", "--short=8", "HEAD").strip()
    report = _audit(repo, monkeypatch)
    assert report.suite.ran and report.summary.tests.passed == 1, report.suite.problem
    assert report.prepared == [
        f"{path}: generated (version 1.4.1.dev1+g{sha}; ignored by git, made at install time)"
    ]
    assert not (repo / path).exists()  # made in the worktree, never in the checkout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conftest", "cause", "message"),
    [
        ("import nosuchmod\n", "environment", "ModuleNotFoundError: No module named 'nosuchmod'"),
        ("from calc.ops import nope\n", "project", "ImportError: cannot import name 'nope'"),
    ],
)
def test_a_broken_conftest_is_one_line_and_exit_1(
    tmp_path: Path, conftest: str, cause: str, message: str
) -> None:
    repo = make_repo(tmp_path / "calc", {**CALC, "tests/conftest.py": conftest})
    done = _cli("audit", "--repo", str(repo), "--json")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "autopilot: suite did not run: pytest: ImportError while loading conftest "
        f"'tests/conftest.py': {message}"
    ), line
    doc = json.loads(done.stdout)
    assert doc["suite"]["problem"]["cause"] == cause
    assert doc["summary"]["line_coverage"] == 0 and doc["summary"]["specs_passing"] == 0


@pytest.mark.slow
def test_a_test_that_ends_the_process_early_is_not_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    early = "import os\n\n\ndef test_exit():\n    os._exit(0)\n"
    repo = make_repo(tmp_path / "calc", {**CALC, "tests/test_zz_exit.py": early})
    report = _audit(repo, monkeypatch)
    assert report.suite.ran is False
    assert report.suite.problem is not None
    assert report.suite.problem.message == (
        "pytest ended without its summary (the process exited early or was killed)"
    )


@pytest.mark.slow
def test_prepare_commands_run_once_per_worktree_and_a_failure_is_reported(
    tmp_path: Path,
) -> None:
    files = {
        **CALC,
        "tests/test_gen.py": "from calc.generated import X\n\n\ndef test_x():\n    assert X == 5\n",
    }
    repo = make_repo(tmp_path / "calc", files)
    command = "sh -c 'echo X = 5 > src/calc/generated.py; echo run >> prepared.log'"
    chain = get_toolchain("python-pytest", prepare=[command])
    runner = make_runner(SandboxSettings(backend="bwrap"), root=repo)
    first = chain.run_suite(repo, runner)
    assert first.ran and first.prepared == [f"prepare: {command} (exit 0)"]
    again = chain.run_suite(repo, runner)
    assert again.ran and again.prepared == []
    assert (repo / "prepared.log").read_text() == "run\n"
    failing = get_toolchain("python-pytest", prepare=["sh -c 'echo no generator >&2; exit 3'"])
    broken = failing.run_suite(repo, runner)
    assert broken.ran is False and broken.validation.problem is not None
    assert broken.validation.problem.message == (
        "prepare command \"sh -c 'echo no generator >&2; exit 3'\" failed (exit 3): no generator"
    )


@pytest.mark.slow
def test_evidence_and_name_rules_map_what_names_alone_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "pyproject.toml": '[project]\nname = "tinydb"\n',
        "src/tinydb/__init__.py": "from .database import TinyDB\n",
        "src/tinydb/database.py": (
            "from .storages import Memory\n\n\nclass TinyDB:\n    def __init__(self):\n"
            "        self.storage = Memory()\n"
        ),
        "src/tinydb/storages.py": (
            "class Memory:\n    def __init__(self):\n        self.data = {}\n"
        ),
        "src/tinydb/table.py": "def rows(t):\n    return list(t)\n",
        "tests/test_tinydb.py": (
            "from tinydb import TinyDB\n\n\ndef test_db():\n"
            "    assert TinyDB().storage.data == {}\n"
        ),
        "tests/test_tables.py": (
            "from tinydb.table import rows\n\n\ndef test_rows():\n"
            "    assert rows('ab') == ['a', 'b']\n"
        ),
    }
    repo = make_repo(tmp_path / "tinydb", files)
    report = _audit(repo, monkeypatch)
    by = {f.source: f for f in report.files}
    assert by["src/tinydb/table.py"].specs == ["tests/test_tables.py"]  # plural
    assert by["src/tinydb/database.py"].specs == ["tests/test_tinydb.py"]  # named after it
    # No name maps storages.py; the suite shows test_tinydb.py runs its code.
    assert by["src/tinydb/storages.py"].specs == []
    assert by["src/tinydb/storages.py"].covered_by == ["tests/test_tinydb.py"]
    assert by["src/tinydb/storages.py"].status == "tested"
    assert report.summary.untested == 0
