"""The run's outside needs, wired: the audit (and the nightly and the repair, which start from
the same `prepared_run`) prepares the project's environment once and reuses it, starts the
declared services, gives each job its own database, shows both read-only to the sandbox, and
leaves nothing running. What cannot be made ready is one line, never a crash."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tasks.audit.prepared import prepared_run
from tasks.audit.run import audit_repo
from tasks.core.config import load_settings
from tasks.core.run_context import current_run_context, job_context
from tasks.sandbox.make import make_runner
from tasks.services import processes_in
from tasks.toolchains.registry import toolchain_for
from tests.envs_projects import py_words, ruby_money
from tests.examples_repo import git, make_example_repo

pytestmark = pytest.mark.slow


def _committed(project: Path, toml: str) -> Path:
    (project / "autopilot.toml").write_text(toml)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True)
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init")
    return project


def _envs(home: Path) -> list[Path]:
    return sorted(p for p in (home / "envs").glob("ruby-*") if p.is_dir())


def _gone(base: Path) -> bool:
    deadline = time.monotonic() + 30
    while (base.exists() or processes_in(str(base))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not base.exists() and not processes_in(str(base))


def test_audit_runs_through_the_prepared_env_built_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("AUTOPILOT_HOME", str(home))
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    project = _committed(ruby_money(tmp_path), "[envs]\nnetwork = false\n")

    first = audit_repo(project)
    assert first.suite.ran and first.summary.tests.passed >= 1, first.suite
    [env] = _envs(home)
    build_log = (env / ".autopilot" / "build.log").read_bytes()
    assert b"bundle install --local" in build_log

    # The second run reuses it: no install, the log untouched, still one environment.
    second = audit_repo(project)
    assert second.suite.ran and second.summary.tests.passed == first.summary.tests.passed
    assert _envs(home) == [env]
    assert (env / ".autopilot" / "build.log").read_bytes() == build_log


def test_python_project_needing_a_package_from_the_index_is_audited_through_its_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`inflection` is in no toolchain of ours: the audit's toolchain runs with the prepared
    environment's interpreter (toolchain_for inside the run), built once, reused."""
    home = tmp_path / "home"
    monkeypatch.setenv("AUTOPILOT_HOME", str(home))
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    project = _committed(py_words(tmp_path), "")

    first = audit_repo(project)
    assert first.suite.ran and first.summary.tests.passed >= 1, first.suite
    assert first.summary.tests.failed == 0 and first.summary.tests.errors == 0
    [env] = sorted(p for p in (home / "envs").glob("python-*") if p.is_dir())
    built = (env / ".autopilot" / "build.log").read_bytes()

    second = audit_repo(project)
    assert second.suite.ran and second.summary.tests.passed == first.summary.tests.passed
    assert (env / ".autopilot" / "build.log").read_bytes() == built
    assert sorted(p for p in (home / "envs").glob("python-*") if p.is_dir()) == [env]


def test_unresolvable_lock_is_one_line_and_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    project = ruby_money(tmp_path)
    gemfile = project / "Gemfile"
    gemfile.write_text(gemfile.read_text() + 'gem "rspec-mocks", "~> 3.12"\n')
    _committed(project, "[envs]\nnetwork = false\n")
    report = audit_repo(project)
    problem = report.suite.problem
    assert problem is not None and problem.tool == "bundler" and problem.cause == "environment"
    line = problem.one_line()
    assert "lock_unresolvable" in line and "bundle lock" in line and "\n" not in line
    assert report.summary.specs_passing == 0


def test_a_database_server_the_machine_lacks_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    repo = make_example_repo("rails_pg", tmp_path / "library")
    (repo / "autopilot.toml").write_text('[services]\npostgres = "99"\n')
    report = audit_repo(repo)
    problem = report.suite.problem
    assert problem is not None and problem.tool == "services"
    line = problem.one_line()
    assert line.startswith("services:") and "99" in line and "\n" not in line
    assert report.summary.specs_passing == 0


def test_postgres_example_each_job_on_its_own_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    repo = make_example_repo("rails_pg", tmp_path / "library")
    settings = load_settings(repo)
    with prepared_run(settings, repo, repo, "ruby-rspec") as ready:
        assert ready.problem is None and ready.schema == "bin/rails db:schema:load"
        assert ready.services is not None and ready.services.dirs is not None
        base = ready.services.dirs.base
        shown = current_run_context()
        assert str(ready.services.dirs.sock) in shown.dirs
        seen = {}
        for job in ("spec/models/book_spec.rb", "spec/lib/isbn_spec.rb"):
            with job_context(job):
                runner = make_runner(settings.sandbox, root=repo)
                # The sandbox shows the environment read-only and sets the job's database.
                assert ready.env is not None and ready.env.path in runner.toolchain_dirs
                seen[job] = runner.fixed_env["PGDATABASE"]
                chain = toolchain_for(settings, "ruby-rspec")
                result = chain.run_specs(repo, [job], None, runner, coverage=False)
                assert result.loaded and result.passed, result.load_error
        assert len(set(seen.values())) == 2 and settings.services.database not in seen.values()
    assert current_run_context().dirs == ()
    assert _gone(base)


def test_audit_of_the_postgres_example_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    repo = make_example_repo("rails_pg", tmp_path / "library")
    before = set(Path("/tmp").glob("ap-svc-*"))
    report = audit_repo(repo)
    assert report.suite.ran and report.summary.tests.failed == 0, report.suite
    assert report.summary.tests.passed == 7
    left = set(Path("/tmp").glob("ap-svc-*")) - before
    assert all(_gone(p) for p in left)
