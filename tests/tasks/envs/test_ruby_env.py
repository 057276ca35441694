"""A Ruby project whose specs need a gem outside our toolchain runs through a prepared
environment: built once with the real Bundler (offline, from a locally built gem), reused, and
run with the real ruby-rspec toolchain in the bwrap sandbox."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs import EnvProblem, EnvSettings, PreparedEnv, prepare_environment, runner_with
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.envs_projects import build_gem, ruby_money

pytestmark = pytest.mark.slow
RUBY = get_toolchain("ruby-rspec").env_builder()
OFFLINE = EnvSettings(network=False)


def _sandbox(project: Path, env: PreparedEnv | None):  # type: ignore[no-untyped-def]
    dirs = env.needs(project).dirs if env else ()
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=120), project, toolchain_dirs=dirs
    )
    return runner_with(runner, env.needs(project)) if env else runner


def _git_status(project: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=project, capture_output=True, text=True
    ).stdout


def test_gem_outside_toolchain_runs_through_env_built_once(tmp_path: Path) -> None:
    project = ruby_money(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    home = tmp_path / "home"
    tc = get_toolchain("ruby-rspec")

    # Without the environment the spec cannot load: the gem is nowhere on this machine.
    bare = tc.run_specs(project, ["spec/invoice_spec.rb"], None, _sandbox(project, None))
    assert not bare.loaded
    before = _git_status(project)

    first = prepare_environment(project, RUBY, home=home, settings=OFFLINE)
    assert isinstance(first, PreparedEnv), first
    assert first.built and first.name.startswith("ruby-")
    env_dir = Path(first.path)
    assert env_dir.parent == home / "envs"
    assert (env_dir / "gems" / "gems" / "money_fmt-0.1.0" / "lib" / "money_fmt.rb").is_file()
    # Only what the machine lacks was installed: rspec comes from Debian's packages.
    installed = sorted(p.name for p in (env_dir / "gems" / "gems").iterdir())
    assert installed == ["money_fmt-0.1.0"]
    # The machine's Bundler does the work, at build and at run time: no switch to another.
    bundler = first.extra["bundler"][0]
    assert bundler and first.needs(project).env["BUNDLER_VERSION"] == bundler
    build_log = Path(first.log).read_text()
    assert "Installing Bundler" not in build_log
    assert "$ bundle install --local" in build_log and "offline" in build_log
    record = json.loads((env_dir / ".autopilot" / "env.json").read_text())
    assert record["commands"] == ["bundle install --local"] and not record["network_used"]
    assert set(record["inputs"]) == {"Gemfile", "Gemfile.lock", "vendor/cache/money_fmt-0.1.0.gem"}
    # The build wrote nothing into the project (no .bundle/config, no vendor/bundle).
    assert _git_status(project) == before

    result = tc.run_specs(project, ["spec/invoice_spec.rb"], None, _sandbox(project, first))
    assert result.loaded and result.passed, result.load_error
    assert [e.status for e in result.examples] == ["passed"]

    # The second preparation reuses it: no install, the log untouched.
    log_before = Path(first.log).read_bytes()
    second = prepare_environment(project, RUBY, home=home, settings=OFFLINE)
    assert isinstance(second, PreparedEnv)
    assert not second.built and second.path == first.path
    assert Path(second.log).read_bytes() == log_before
    # A worktree elsewhere with the same lock gets the same environment.
    clone = tmp_path / "worktree"
    shutil.copytree(project, clone)
    third = prepare_environment(clone, RUBY, home=home, settings=OFFLINE)
    assert isinstance(third, PreparedEnv) and third.path == first.path and not third.built
    again = tc.run_specs(clone, ["spec/invoice_spec.rb"], None, _sandbox(clone, third))
    assert again.passed


def test_the_sandbox_sees_the_env_read_only(tmp_path: Path) -> None:
    project = ruby_money(tmp_path)
    env = prepare_environment(project, RUBY, home=tmp_path / "home", settings=OFFLINE)
    assert isinstance(env, PreparedEnv)
    runner = _sandbox(project, env)
    target = Path(env.path) / "gems" / "gems" / "money_fmt-0.1.0" / "lib" / "money_fmt.rb"
    write = runner.run(["sh", "-c", f"echo pwned >> {target}"], cwd=project)
    assert write.exit_code != 0 and "Read-only file system" in write.stderr
    assert "pwned" not in target.read_text()
    # The rest of Autopilot's home (the archive, other caches) stays invisible.
    (tmp_path / "home" / "archive").mkdir()
    ls = runner.run(["ls", str(tmp_path / "home")], cwd=project)
    assert ls.exit_code != 0 or "archive" not in ls.stdout


def test_unknown_gem_offline_is_one_line_and_no_env(tmp_path: Path) -> None:
    project = ruby_money(tmp_path)
    gemfile = project / "Gemfile"
    gemfile.write_text(gemfile.read_text() + 'gem "autopilot_no_such_gem", "1.0"\n')
    lock = project / "Gemfile.lock"
    text = lock.read_text().replace(
        "    money_fmt (0.1.0)\n", "    autopilot_no_such_gem (1.0)\n    money_fmt (0.1.0)\n"
    )
    lock.write_text(
        text.replace("DEPENDENCIES\n", "DEPENDENCIES\n  autopilot_no_such_gem (= 1.0)\n")
    )
    home = tmp_path / "home"
    got = prepare_environment(project, RUBY, home=home, settings=OFFLINE)
    assert isinstance(got, EnvProblem), got
    assert got.cause == "unknown_package"
    assert "autopilot_no_such_gem" in got.message and "\n" not in got.one_line()
    assert got.log is not None and "Could not find" in Path(got.log).read_text()
    assert not [p for p in (home / "envs").iterdir() if p.name.startswith("ruby-")]

    # Allowed to reach the registries, but none is reachable: that is the cause named.
    online = prepare_environment(project, RUBY, home=home, settings=EnvSettings())
    assert isinstance(online, EnvProblem)
    assert online.cause == "no_registry_access", online.message


def test_missing_native_library_is_one_line(tmp_path: Path) -> None:
    project = ruby_money(tmp_path, extra_gems=("needs_header",))
    # Resolve the new lock offline from the cached gems, as a project would commit it.
    (project / "Gemfile").write_text(
        (project / "Gemfile").read_text() + 'gem "needs_header", "0.1.0"\n'
    )
    lock = project / "Gemfile.lock"
    lock.write_text(
        lock.read_text()
        .replace("    money_fmt (0.1.0)\n", "    money_fmt (0.1.0)\n    needs_header (0.1.0)\n")
        .replace("  money_fmt (= 0.1.0)\n", "  money_fmt (= 0.1.0)\n  needs_header (= 0.1.0)\n")
    )
    got = prepare_environment(project, RUBY, home=tmp_path / "home", settings=OFFLINE)
    assert isinstance(got, EnvProblem), got
    assert got.cause == "missing_native_library", got.message
    # Which header is missing first depends on the machine: Ruby's own (no ruby-dev) or the
    # library the gem wants; either way the line names it and the package to install.
    ruby_dev = any(Path("/usr/include").glob("ruby-*/ruby.h"))
    want = "autopilot_missing_lib.h" if ruby_dev else "ruby.h (Ruby's development headers)"
    assert got.message.startswith("gem needs_header 0.1.0 needs header " + want), got.message
    assert ruby_dev or "(install ruby-dev)" in got.message


def test_out_of_date_lock_is_one_line(tmp_path: Path) -> None:
    project = ruby_money(tmp_path)
    (project / "Gemfile").write_text(
        (project / "Gemfile").read_text() + 'gem "rspec-mocks", "~> 3.12"\n'
    )
    got = prepare_environment(project, RUBY, home=tmp_path / "home", settings=OFFLINE)
    assert isinstance(got, EnvProblem), got
    assert got.cause == "lock_unresolvable", got.message
    assert "bundle lock" in got.message


def test_project_without_lock_has_nothing_to_prepare(tmp_path: Path) -> None:
    project = ruby_money(tmp_path)
    (project / "Gemfile.lock").unlink()
    assert prepare_environment(project, RUBY, home=tmp_path / "home") is None
    assert build_gem  # the helper stays importable for the other modules
