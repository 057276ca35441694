"""examples/rails_pg, a Rails 6.1 app on PostgreSQL, run for real: its declared throwaway
PostgreSQL, the schema loaded the Rails way in the bwrap sandbox, and its spec files run in
parallel by the ruby-rspec toolchain, each on its own database; nothing left running after."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs import PreparedEnv, prepare_environment, runner_with
from tasks.sandbox.make import make_runner
from tasks.services import processes_in, running_services
from tasks.services.settings import services_from_toml
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import EXAMPLES, git, make_example_repo

pytestmark = pytest.mark.slow
RUBY = get_toolchain("ruby-rspec").env_builder()
SPECS = ["spec/models/book_spec.rb", "spec/lib/isbn_spec.rb"]


def _inserted(svc, database: str) -> int:  # type: ignore[no-untyped-def]
    sql = f"select tup_inserted from pg_stat_database where datname = '{database}'"
    return int(svc.postgres.psql(sql, "postgres").stdout.strip() or 0)


def test_example_declares_postgres_and_commits_its_lock() -> None:
    settings = services_from_toml(EXAMPLES / "rails_pg")
    assert settings.postgres is True and settings.redis is False
    tracked = git(EXAMPLES.parent, "ls-files", "examples/rails_pg").split()
    assert "examples/rails_pg/Gemfile.lock" in tracked
    lock = (EXAMPLES / "rails_pg" / "Gemfile.lock").read_text()
    assert "    pg (1.4" in lock and "    rails (6.1.7" in lock


def test_specs_run_in_the_sandbox_each_job_on_its_own_database(tmp_path: Path) -> None:
    repo = make_example_repo("rails_pg", tmp_path / "library")
    home = tmp_path / "home"
    env = prepare_environment(repo, RUBY, home=home)
    # Every gem is Debian's: the environment installs nothing, but it is the same path.
    assert isinstance(env, PreparedEnv), env
    assert not (Path(env.path) / "gems" / "gems").exists()
    tc = get_toolchain("ruby-rspec")
    with running_services(services_from_toml(repo)) as svc:
        assert svc.dirs is not None and svc.postgres is not None
        base = svc.dirs.base
        needs = env.needs(repo).merged(svc.needs())
        sandbox = make_runner(
            SandboxSettings(backend="bwrap", timeout_s=180), repo, toolchain_dirs=needs.dirs
        )
        convention = tc.schema_command(repo)
        assert svc.prepare_schema(runner_with(sandbox, needs), repo, convention) == (
            "bin/rails db:schema:load"
        )
        tables = svc.postgres.psql(
            "select string_agg(tablename, ',' order by tablename) from pg_tables "
            "where schemaname = 'public'",
            svc.template,
        ).stdout.strip()
        assert tables == "ar_internal_metadata,books,loans,schema_migrations"
        template_rows = _inserted(svc, svc.template)

        def job(spec: str):  # type: ignore[no-untyped-def]
            job_needs = env.needs(repo).merged(svc.for_job(spec))
            runner = runner_with(sandbox, job_needs)
            return job_needs, tc.run_specs(repo, [spec], None, runner, coverage=False)

        with ThreadPoolExecutor(max_workers=2) as pool:
            done = list(pool.map(job, SPECS))
        for (job_needs, result), spec in zip(done, SPECS, strict=True):
            assert result.loaded and result.passed, (spec, result.load_error)
            assert {e.status for e in result.examples} == {"passed"}
            # The spec's rows went to the job's own copy, never to the template.
            assert _inserted(svc, job_needs.env["PGDATABASE"]) > 0
        names = {n.env["PGDATABASE"] for n, _ in done}
        assert len(names) == 2 and svc.template not in names
        assert _inserted(svc, svc.template) == template_rows

        # The whole suite with coverage, as the audit measures it.
        suite = tc.run_suite(
            repo, runner_with(sandbox, env.needs(repo).merged(svc.for_job("suite")))
        )
        assert suite.ran and suite.validation.passed, suite.validation.load_error
        assert len(suite.validation.examples) == 7
        # Half tested: the loan model and the report were never run.
        assert suite.files["app/models/book.rb"].ratio > 0.8
        assert suite.files["app/services/overdue_report.rb"].covered_lines <= 3
    deadline = time.monotonic() + 30
    while (base.exists() or processes_in(str(base))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not base.exists() and not processes_in(str(base))


def test_without_its_database_the_suite_says_so(tmp_path: Path) -> None:
    """No service: the specs cannot connect, and the run is not a pass."""
    repo = make_example_repo("rails_pg", tmp_path / "library")
    sandbox = make_runner(SandboxSettings(backend="bwrap", timeout_s=180), repo)
    result = get_toolchain("ruby-rspec").run_specs(repo, [SPECS[0]], None, sandbox)
    assert not result.passed
    text = (result.load_error or "") + " ".join(e.message or "" for e in result.examples)
    assert "PG::ConnectionBad" in text or "could not connect" in text, text[:500]
