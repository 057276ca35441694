"""Why a suite did not run: the real cause in one line, whose problem it is, never a pass.

Unit tests over the outputs the tools really print (pytest 9, RSpec 3.12, Bundler 2.3, RuboCop
1.39); the field tests (test_field_python.py, test_field_rails.py) produce them for real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tasks.audit.baseline import run_baseline, specs_failing_to_load
from tasks.audit.report import build_report
from tasks.core.types import (
    CommandResult,
    MappedFile,
    Mapping,
    SuiteProblem,
    TestCaseResult,
    ValidationResult,
)
from tasks.toolchains.base import ToolchainError
from tasks.toolchains.python.diagnose import diagnose_pytest
from tasks.toolchains.registry import get_toolchain
from tasks.toolchains.ruby.diagnose import diagnose_rspec
from tasks.toolchains.ruby.lint import lint_command, lint_error
from tests.examples_repo import SubprocessRunner

CONFTEST_MISSING = """\
ImportError while loading conftest '/tmp/wt/tests/conftest.py'.
tests/conftest.py:1: in <module>
    import nosuchmod
E   ModuleNotFoundError: No module named 'nosuchmod'
"""
CONFTEST_PROJECT = """\
ImportError while loading conftest '/tmp/wt/tests/conftest.py'.
tests/conftest.py:1: in <module>
    from inventory.stock import Stock
E   ImportError: cannot import name 'Stock' from 'inventory.stock' (/tmp/wt/src/inventory/stock.py)
"""
SYNTAX = """\
ImportError while loading conftest '/tmp/wt/tests/conftest.py'.
/tmp/wt/tests/conftest.py:3: in <module>
    from inventory import stock
E     File "/tmp/wt/src/inventory/stock.py", line 4
E       def add(self, item:
E                         ^
E   SyntaxError: '(' was never closed
"""
USAGE = """\
ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]
python -m pytest: error: unrecognized arguments: --cov=inventory --cov-report=term
  inifile: /tmp/wt/pytest.ini
  rootdir: /tmp/wt
"""
GEMFILE = """\
[!] There was an error parsing `Gemfile`: syntax error, unexpected ',', expecting end-of-input\
 - gem "rails",, "~> 6.1". Bundler cannot continue.

 #  from /tmp/wt/Gemfile:7
 #  -------------------------------------------
"""
RSPEC_HELPER = """\
An error occurred while loading rails_helper.
Failure/Error: require "paper_trail"

LoadError:
  cannot load such file -- paper_trail
# ./spec/rails_helper.rb:5:in `<top (required)>'
"""
RSPEC_SYNTAX = """\
An error occurred while loading ./spec/models/customer_spec.rb.
Failure/Error: __send__(method, file)

SyntaxError:
  /tmp/wt/app/models/customer.rb:4: syntax error, unexpected end-of-input
# ./app/models/customer.rb:4:in `<main>'
# ./spec/models/customer_spec.rb:3:in `<top (required)>'
"""


def test_a_conftest_needing_a_missing_library_is_the_environments_problem() -> None:
    problem = diagnose_pytest(CONFTEST_MISSING, 4, Path("/tmp/wt"), ["inventory"], "/venv/python")
    assert problem.cause == "environment"
    assert problem.message == (
        "ImportError while loading conftest 'tests/conftest.py': "
        "ModuleNotFoundError: No module named 'nosuchmod'"
    )
    assert (
        problem.hint is not None and "nosuchmod" in problem.hint and "/venv/python" in problem.hint
    )
    assert problem.file == "tests/conftest.py" and problem.line == 1
    assert "\n" not in problem.one_line()


def test_a_conftest_that_cannot_import_the_projects_code_is_the_projects_problem() -> None:
    problem = diagnose_pytest(CONFTEST_PROJECT, 4, Path("/tmp/wt"), ["inventory"])
    assert problem.cause == "project"
    assert problem.error_type == "ImportError"
    assert "cannot import name 'Stock' from 'inventory.stock'" in problem.message


def test_a_syntax_error_in_the_project_is_the_projects_problem() -> None:
    problem = diagnose_pytest(SYNTAX, 4, Path("/tmp/wt"), ["inventory"])
    assert (problem.cause, problem.error_type) == ("project", "SyntaxError")
    assert problem.message.endswith("SyntaxError: '(' was never closed")


def test_an_option_from_a_missing_plugin_is_a_usage_error_with_a_hint() -> None:
    problem = diagnose_pytest(USAGE, 4, Path("/tmp/wt"), [], "Autopilot's isolated interpreter")
    assert problem.cause == "environment"
    assert problem.message == "unrecognized arguments: --cov=inventory --cov-report=term"
    assert problem.hint is not None and "set `python` in autopilot.toml" in problem.hint


@pytest.mark.slow
@pytest.mark.parametrize(
    "strict", ["addopts = --strict-config", "filterwarnings = error"], ids=["strict", "werror"]
)
@pytest.mark.parametrize(
    ("option", "plugin"),
    [("asyncio_default_fixture_loop_scope", "pytest-asyncio"), ("frobnicate_level", None)],
)
def test_an_unknown_config_option_names_the_plugin_that_is_missing(
    tmp_path: Path, strict: str, option: str, plugin: str | None
) -> None:
    # The real pytest, without the plugin that registers the option.
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{strict}\n{option} = function\n")
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (3, 4), done.stdout
    problem = diagnose_pytest(
        done.stdout + done.stderr, done.returncode, tmp_path, [], "venv/bin/python"
    )
    assert problem.cause == "environment"
    assert problem.message == f"Unknown config option: {option}"
    assert problem.hint is not None and "venv/bin/python" in problem.hint
    if plugin is not None:
        assert problem.hint.startswith(f"{option} is an option of {plugin}, which venv/bin/python")
    else:
        assert problem.hint.startswith(f"no plugin installed in venv/bin/python registers {option}")


def test_an_interpreter_without_coverage_says_so() -> None:
    problem = diagnose_pytest("/venv/bin/python: No module named coverage\n", 1, Path("/w"), [])
    assert problem.tool == "python" and problem.cause == "environment"
    assert "No module named coverage" in problem.message
    assert problem.hint == "install coverage in that environment"


def test_detail_keeps_head_and_tail_and_redacts_secrets() -> None:
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    output = f"ERROR: first line {secret}\n" + "noise\n" * 2000 + "E   RuntimeError: the end\n"
    problem = diagnose_pytest(output, 3, Path("/w"), [])
    assert problem.detail.startswith("ERROR: first line")
    assert problem.detail.rstrip().endswith("E   RuntimeError: the end")
    assert secret not in problem.detail and "[REDACTED]" in problem.detail
    assert len(problem.detail) <= 3000


def test_bundler_refusing_the_gemfile_is_one_line() -> None:
    problem = diagnose_rspec(GEMFILE, 4, Path("/tmp/wt"))
    assert (problem.tool, problem.cause) == ("bundler", "environment")
    assert problem.message.startswith("syntax error, unexpected ','")
    assert problem.message.endswith("(Gemfile:7)")


def test_a_ruby_the_gemfile_does_not_accept_says_which_ruby_to_use() -> None:
    output = (
        "Your Ruby version is 3.1.2, but your Gemfile specified 3.0.1 "
        "(Bundler::RubyVersionMismatch)\n"
    )
    problem = diagnose_rspec(output, 18, Path("/tmp/wt"))
    assert (problem.tool, problem.cause) == ("bundler", "environment")
    assert problem.one_line() == (
        "bundler: Your Ruby version is 3.1.2, but your Gemfile specified 3.0.1 "
        "(Bundler::RubyVersionMismatch) (the tests run with Ruby 3.1.2: run them with Ruby "
        "3.0.1, or relax the Gemfile's `ruby` line)"
    )


def test_a_missing_gem_in_the_spec_helper_is_the_environments_problem(tmp_path: Path) -> None:
    problem = diagnose_rspec("", 1, tmp_path, [RSPEC_HELPER])
    assert problem.cause == "environment"
    assert problem.message == (
        "An error occurred while loading rails_helper: LoadError: cannot load such file -- "
        "paper_trail"
    )
    assert problem.hint == (
        "paper_trail is not installed for this Ruby: add the paper_trail gem to the bundle"
    )


def test_a_syntax_error_in_the_app_is_the_projects_problem() -> None:
    problem = diagnose_rspec("", 1, Path("/tmp/wt"), [RSPEC_SYNTAX])
    assert (problem.cause, problem.error_type) == ("project", "SyntaxError")
    assert problem.file == "app/models/customer.rb" and problem.line == 4


def test_rubocop_unknown_ruby_version_is_one_line_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / ".ruby-version").write_text("3.9.0\n")
    (tmp_path / "a.rb").write_text("x = 1\n")
    done = subprocess.run(
        ["rubocop", "--format", "json", "a.rb"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr  # RuboCop 1.39 refuses the version
    cmd = CommandResult(argv=["rubocop"], exit_code=2, stdout=done.stdout, stderr=done.stderr)
    line = lint_error("rubocop", cmd, tmp_path)
    assert line.startswith("rubocop: RuboCop does not know Ruby 3.9 (named in .ruby-version)")
    assert "TargetRubyVersion: 3.1" in line and "\n" not in line


def test_a_lint_configuration_needing_a_missing_gem_names_it(tmp_path: Path) -> None:
    (tmp_path / ".rubocop.yml").write_text("require:\n  - standard\n")
    (tmp_path / "a.rb").write_text("x = 1\n")
    done = subprocess.run(
        ["rubocop", "--format", "json", "a.rb"], cwd=tmp_path, capture_output=True, text=True
    )
    cmd = CommandResult(argv=["rubocop"], exit_code=2, stdout=done.stdout, stderr=done.stderr)
    line = lint_error("rubocop", cmd, tmp_path)
    assert line.startswith("rubocop: cannot load such file -- standard (")
    assert "Gemfile" in line and "\n" not in line


def test_standard_projects_lint_with_standardrb_or_say_it_is_missing(tmp_path: Path) -> None:
    (tmp_path / ".standard.yml").write_text("ruby_version: 3.1\n")

    def no_bundle(_repo: Path, _gem: str) -> bool:
        return False

    def bundled(_repo: Path, gem: str) -> bool:
        return gem == "standard"

    # No silent fallback to RuboCop's defaults when the standard gem is not there.
    with pytest.raises(Exception, match=r"^standardrb: .*standard gem is not installed"):
        lint_command(tmp_path, ["a.rb"], False, None, no_bundle)
    tool, argv = lint_command(tmp_path, ["a.rb"], True, None, bundled)
    assert tool == "standardrb"
    assert argv[:3] == ["bundle", "exec", "standardrb"] and "--fix" in argv
    (tmp_path / ".rubocop.yml").write_text("inherit_gem:\n  standard: config/base.yml\n")
    assert lint_command(tmp_path, ["a.rb"], False, None, no_bundle)[0] == "rubocop"


def _mapping() -> Mapping:
    return Mapping(
        toolchain="python-pytest",
        files=[
            MappedFile(
                source="pkg/a.py",
                kind="python",
                specs=["tests/test_a.py"],
                expected_spec="tests/test_a.py",
            ),
            MappedFile(source="pkg/b.py", kind="python", specs=[], expected_spec="tests/test_b.py"),
        ],
        untested=["pkg/b.py"],
    )


def test_a_suite_that_did_not_run_is_never_a_pass() -> None:
    problem = SuiteProblem(tool="pytest", cause="environment", message="unrecognized arguments")
    suite = ValidationResult(toolchain="python-pytest", loaded=False, problem=problem)
    report = build_report(
        repo="r",
        commit="c" * 40,
        mapping=_mapping(),
        suite=suite,
        coverage={},
        broken_specs={},
        lint=[],
        static={},
    )
    assert report.suite.ran is False and report.suite.problem == problem
    assert report.exit_code() == 1
    by = {f.source: f for f in report.files}
    assert by["pkg/a.py"].status == "failing"
    assert by["pkg/a.py"].reason == "the suite did not run: pytest: unrecognized arguments"
    assert report.summary.specs_passing == 0 and report.summary.specs_not_run == 1


def test_specs_are_counted_once_whatever_path_form_the_report_uses(tmp_path: Path) -> None:
    case = TestCaseResult(id="x", name="x", file=str(tmp_path / "tests/test_a.py"), status="passed")
    suite = ValidationResult(
        toolchain="python-pytest",
        loaded=True,
        examples=[case, case.model_copy(update={"file": "tests/test_a.py", "status": "skipped"})],
    )
    broken = ValidationResult(
        toolchain="python-pytest",
        loaded=False,
        load_error=f"ImportError while importing test module '{tmp_path}/tests/test_b.py'.",
    )
    assert specs_failing_to_load(get_toolchain("python-pytest"), broken, tmp_path) == [
        "tests/test_b.py"
    ]
    report = build_report(
        repo="r",
        commit="c" * 40,
        mapping=_mapping(),
        suite=suite,
        coverage={},
        broken_specs={"tests/test_b.py": "did not load"},
        lint=[],
        static={},
        project=tmp_path,
    )
    s = report.summary
    assert (s.specs_passing, s.specs_failing, s.specs_not_run) == (1, 1, 0)
    assert s.tests.model_dump(exclude={"duration"}) == {
        "tests": 2,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "skipped": 1,
        "duplicates": 0,
    }
    assert report.files[0].tests.tests == 2 and report.files[0].status == "tested"


def test_evidence_makes_a_source_tested_whatever_the_names() -> None:
    suite = ValidationResult(
        toolchain="python-pytest",
        loaded=True,
        examples=[TestCaseResult(id="x", name="x", file="tests/test_db.py", status="passed")],
    )
    report = build_report(
        repo="r",
        commit="c" * 40,
        mapping=_mapping(),
        suite=suite,
        coverage={},
        broken_specs={},
        lint=[],
        static={},
        tested_by={"pkg/b.py": ["tests/test_db.py"]},
    )
    b = next(f for f in report.files if f.source == "pkg/b.py")
    assert (b.status, b.covered_by) == ("tested", ["tests/test_db.py"])
    a = next(f for f in report.files if f.source == "pkg/a.py")
    assert (a.status, a.reason) == ("untested", "tests/test_a.py: no test ran")


def _pyrepo(tmp_path: Path, tests: dict[str, str]) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (tmp_path / "tests").mkdir()
    for name, text in tests.items():
        (tmp_path / "tests" / name).write_text(text)
    return tmp_path


@pytest.mark.slow
def test_every_test_file_set_aside_means_the_suite_did_not_run(tmp_path: Path) -> None:
    repo = _pyrepo(
        tmp_path,
        {
            "test_a.py": "import pkg.nope\n\ndef test_a():\n    pass\n",
            "test_b.py": "def test_b(:\n",
        },
    )
    chain = get_toolchain("python-pytest", home=tmp_path / "home")
    suite = run_baseline(repo, chain, SubprocessRunner(), spec_timeout_s=60)
    assert set(suite.broken) == {"tests/test_a.py", "tests/test_b.py"}
    assert suite.broken["tests/test_b.py"].startswith("did not load: ")
    assert "SyntaxError" in suite.broken["tests/test_b.py"]
    assert suite.ran is False
    assert suite.validation.problem is not None


@pytest.mark.slow
def test_a_suite_that_collects_nothing_from_its_test_files_did_not_run(tmp_path: Path) -> None:
    repo = _pyrepo(tmp_path, {"test_a.py": "def helper():\n    pass\n"})
    chain = get_toolchain("python-pytest", home=tmp_path / "home")
    suite = run_baseline(repo, chain, SubprocessRunner(), spec_timeout_s=60)
    assert suite.ran is False
    assert suite.validation.problem is not None
    assert suite.validation.problem.message == "ran no test from 1 test files"


def test_a_ruff_configuration_ruff_cannot_read_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "ruff.toml").write_text('line-length = "wide"\n')
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    with pytest.raises(ToolchainError) as err:
        get_toolchain("python-pytest").lint(tmp_path, ["test_a.py"], False, SubprocessRunner())
    assert str(err.value) == (
        "ruff: Failed to load configuration `ruff.toml`: TOML parse error at line 1, column 15: "
        'invalid type: string "wide", expected i64 (ruff follows the project\'s ruff '
        "configuration: fix it, or lint with a ruff that reads it)"
    )


@pytest.mark.slow
def test_an_unreachable_prefect_server_is_one_line(tmp_path: Path) -> None:
    import os
    import sys

    repo = _pyrepo(tmp_path, {"test_a.py": "def test_a():\n    pass\n"})
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "x"],
        cwd=repo,
        check=True,
    )
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    autopilot = str(Path(sys.executable).with_name("autopilot"))
    done = subprocess.run(
        [autopilot, "audit", "--repo", str(repo)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "autopilot: error: cannot reach the Prefect server at http://127.0.0.1:9"
    )


def test_fewer_tests_reported_than_collected_is_not_a_run(tmp_path: Path) -> None:
    from tasks.toolchains.python.results import parse_pytest_run

    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest" tests="1">'
        '<testcase classname="tests.test_a" name="test_a" file="tests/test_a.py" line="0"/>'
        "</testsuite></testsuites>"
    )
    cmd = CommandResult(argv=["pytest"], exit_code=0, stdout="1 passed")
    status = {"collected": 3, "reported": 1, "exitstatus": 0, "rootdir": str(tmp_path)}
    result = parse_pytest_run(tmp_path, xml, cmd, status=status)
    assert result.loaded is False and result.problem is not None
    assert result.problem.message == "pytest collected 3 tests but reported 1"
    # A run stopped by a failure (-x, --maxfail) reports fewer tests, and that is a run.
    failed = xml.read_text().replace("/>", '><failure message="boom"/></testcase>', 1)
    xml.write_text(failed)
    stopped = parse_pytest_run(tmp_path, xml, cmd, status={**status, "stopped": "-x"})
    assert stopped.loaded is True and stopped.examples[0].status == "failed"


def test_terminal_escape_sequences_never_reach_a_problem_line() -> None:
    # pytest prints a colour reset even into a pipe; the line a user reads must not carry it.
    from tasks.toolchains.diagnose import output_lines

    text = (
        "E   PackageNotFoundError: No package metadata was found for humanize\x1b[0m\n"
        "\x1b[31mred\x1b[0m  \n"
    )
    assert output_lines(text) == [
        "E   PackageNotFoundError: No package metadata was found for humanize",
        "red",
    ]
