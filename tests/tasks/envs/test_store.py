"""Prepared environments' store: atomic builds, one builder at a time, pruning, and the
one-line causes of failed installs (real processes, no mocks of the store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.envs.classify import classify
from tasks.envs.install import StepResult
from tasks.envs.needs import RunNeeds, runner_with
from tasks.envs.store import (
    BuildFailed,
    EnvRecord,
    ensure_env,
    failed_log_path,
    list_envs,
    prune_envs,
    read_record,
)
from tasks.toolchains.python.install_errors import installer_rules
from tasks.toolchains.ruby.bundle_errors import bundler_rules
from tests.paths import REPO_ROOT

NAME = "ruby-" + "ab" * 12


def _record(final: Path) -> EnvRecord:
    return EnvRecord(
        name=final.name, stack="ruby", key=final.name[5:], created_at="now", toolchain="t"
    )


def test_build_once_then_reuse(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(tmp: Path, final: Path, log_path: Path) -> EnvRecord:
        calls.append(tmp)
        (tmp / "payload").write_text("x")
        log_path.write_text("installed\n")
        assert not final.exists()  # nothing is visible at the final place during the build
        return _record(final)

    path, record, built = ensure_env(tmp_path, NAME, build, lock_timeout_s=5)
    assert built and (path / "payload").read_text() == "x"
    again, _, built_again = ensure_env(tmp_path, NAME, build, lock_timeout_s=5)
    assert again == path and not built_again and len(calls) == 1
    assert read_record(path) == record
    assert not list((tmp_path / "envs").glob(".build-*"))


def test_failed_build_leaves_nothing_but_its_log(tmp_path: Path) -> None:
    def build(tmp: Path, final: Path, log_path: Path) -> EnvRecord:
        (tmp / "half").write_text("half-installed")
        log_path.write_text("Could not find gem 'nope'\n")
        raise BuildFailed("unknown_package", "gem nope not found")

    with pytest.raises(BuildFailed, match="gem nope"):
        ensure_env(tmp_path, NAME, build, lock_timeout_s=5)
    root = tmp_path / "envs"
    assert not (root / NAME).exists() and not list(root.glob(".build-*"))
    kept = failed_log_path(tmp_path, NAME)
    assert kept is not None and "Could not find gem" in kept.read_text()


def test_interrupted_build_is_invisible_and_rebuilt(tmp_path: Path) -> None:
    """A directory at the final place without a record (a crash between the rename and the
    record, or something not ours) is never used: it is rebuilt."""
    (tmp_path / "envs" / NAME).mkdir(parents=True)
    (tmp_path / "envs" / NAME / "junk").write_text("x")
    path, _, built = ensure_env(tmp_path, NAME, lambda t, f, lg: _record(f), lock_timeout_s=5)
    assert built and not (path / "junk").exists()


_BUILDER = """
import json, sys, time
from pathlib import Path
from tasks.envs.store import EnvRecord, ensure_env

def build(tmp, final, log_path):
    log_path.write_text("build by " + sys.argv[2] + "\\n")
    for i in range(20):
        (tmp / f"file{i}").write_text(sys.argv[2])
        time.sleep(0.05)
    return EnvRecord(name=final.name, stack="ruby", key=final.name[5:], created_at="x",
                     toolchain="t")

path, record, built = ensure_env(Path(sys.argv[1]), sys.argv[3], build, lock_timeout_s=60)
print(json.dumps({"path": str(path), "built": built}))
"""


def test_concurrent_builders_do_not_corrupt_each_other(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILDER, str(tmp_path), who, NAME],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for who in ("first", "second", "third")
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert sorted(o["built"] for o in outs) == [False, False, True]
    env = Path(outs[0]["path"])
    assert {o["path"] for o in outs} == {str(env)}
    # One builder's files only, all of them.
    contents = {(env / f"file{i}").read_text() for i in range(20)}
    assert len(contents) == 1
    assert (env / ".autopilot" / "build.log").read_text() == f"build by {contents.pop()}\n"


def test_prune_by_age_and_count_keeps_protected_and_foreign(tmp_path: Path) -> None:
    names = [f"python-{c * 24}" for c in "abcd"]
    now = time.time()
    for age, name in enumerate(names):
        path, _, _ = ensure_env(tmp_path, name, lambda t, f, lg: _record(f), lock_timeout_s=5)
        stamp = now - age * 10 * 86400  # a: now, b: 10 days, c: 20 days, d: 30 days
        os.utime(path / ".autopilot" / "last-used", (stamp, stamp))
    foreign = tmp_path / "envs" / "pytest-coverage-0123456789abcdef"
    foreign.mkdir()
    stale = tmp_path / "envs" / ".build-python-x-123"
    stale.mkdir()
    os.utime(stale, (now - 3 * 86400, now - 3 * 86400))
    removed = prune_envs(tmp_path, max_age_days=25, keep=2, protect=(names[2],), now=now)
    # d is too old; c is beyond the count but protected; b is the second most recent.
    assert sorted(removed) == sorted([names[3], stale.name])
    assert [r.name for _, r in list_envs(tmp_path)] == names[:3]
    assert foreign.is_dir()


def _step(output: str, code: int = 5) -> StepResult:
    return StepResult(("bundle", "install"), code, output, False, 1.0)


@pytest.mark.parametrize(
    ("stack", "output", "cause", "words"),
    [
        (
            "ruby",
            "Could not find gem 'nope_gem (= 1.0)' in locally installed gems.\n",
            "unknown_package",
            "gem nope_gem not found",
        ),
        (
            "ruby",
            "Fetching source index\nCould not reach host index.example. Check your network\n",
            "no_registry_access",
            "no registry access",
        ),
        (
            "ruby",
            "checking for libpq-fe.h... no\nAn error occurred while installing pg (1.5.4), "
            "and Bundler cannot continue.\n",
            "missing_native_library",
            "gem pg 1.5.4 needs header libpq-fe.h (install libpq-dev)",
        ),
        (
            "ruby",
            "You are trying to install in deployment mode after changing\nyour Gemfile.\n",
            "lock_unresolvable",
            "bundle lock",
        ),
        (
            "ruby",
            "Your Ruby version is 3.1.2, but your Gemfile specified 3.3.0\n",
            "toolchain_mismatch",
            "3.3.0",
        ),
        (
            "python",
            "  x No solution found when resolving dependencies:\n  Because nope-pkg was not "
            "found in the package registry and you require nope-pkg, we can conclude...\n",
            "unknown_package",
            "package nope-pkg not found",
        ),
        (
            "python",
            "error: Failed to fetch: `https://index.example/simple/x/`\n  Caused by: "
            "dns error: failed to lookup address information\n",
            "no_registry_access",
            "no registry access",
        ),
        (
            # What the install sandbox writes when its egress rule refused the registry.
            "python",
            "egress index.example:443 refused (not in [envs] allow_hosts)\n"
            "error: Request failed after 3 retries\n  cause: Failed to fetch: "
            "https://index.example/simple/x/\n  cause: tunnel error: unsuccessful\n",
            "no_registry_access",
            "index.example:443 refused by the install step's egress rule (not in [envs] "
            "allow_hosts)",
        ),
        (
            "python",
            "src/psycopg.c:1:10: fatal error: libpq-fe.h: No such file or directory\n"
            "Failed to build `psycopg2==2.9.9`\n",
            "missing_native_library",
            "package psycopg2 needs header libpq-fe.h (install libpq-dev)",
        ),
        (
            # What Debian's Bundler 2.3 says of a current Rails app's Gemfile (seen in the field).
            "ruby",
            "Bundler 2.3.15 is running, but your lockfile was generated with 4.0.3. Installing"
            " Bundler 4.0.3 and restarting using that version.\nThere was an error installing"
            " the locked bundler version (4.0.3).\n\n[!] There was an error parsing `Gemfile`:"
            " You passed :force_ruby_platform as an option for gem 'sqlite3', but it is invalid."
            " You may be able to resolve this by upgrading Bundler to the newest version.."
            " Bundler cannot continue.\n\n #  from Gemfile:9\n #  ------\n",
            "toolchain_mismatch",
            "Gemfile needs a newer Bundler than 2.3.15 (the lock was made with 4.0.3): You passed",
        ),
        (
            "ruby",
            "something odd\nthe last telling line\n #  ------\n# exit 5\n",
            "build_failed",
            "last telling line",
        ),
    ],
)
def test_classify_names_the_cause_in_one_line(
    stack: str, output: str, cause: str, words: str
) -> None:
    rules = bundler_rules if stack == "ruby" else installer_rules
    got, message = classify(_step(output), rules, network=True)
    assert got == cause
    assert words in message and "\n" not in message


def test_needs_merge_and_runner_env_order(tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    class Recorder:
        root = tmp_path

        def run(self, argv, *, cwd, env=None, timeout_s=None, **kwargs):  # type: ignore[no-untyped-def]
            seen.update(env or {})
            return None

    needs = RunNeeds(dirs=("/a",), env={"X": "1", "RAILS_ENV": "ours"}).merged(
        RunNeeds(dirs=("/b", "/a"), env={"Y": "2"})
    )
    assert needs.dirs == ("/a", "/b")
    runner = runner_with(Recorder(), needs)
    runner.run(["true"], cwd=tmp_path, env={"RAILS_ENV": "test"})
    assert seen == {"X": "1", "Y": "2", "RAILS_ENV": "test"}
    assert runner.root == tmp_path


def test_users_own_environment_and_preparation_off(tmp_path: Path) -> None:
    from tasks.envs import EnvSettings, prepare_environment, user_environment
    from tasks.toolchains.ruby.bundle import BundleBuilder

    (tmp_path / "Gemfile").write_text('source "https://rubygems.org"\n')
    (tmp_path / "Gemfile.lock").write_text("GEM\n")
    off = EnvSettings(prepare=False)
    assert prepare_environment(tmp_path, BundleBuilder(), home=tmp_path, settings=off) is None
    assert prepare_environment(tmp_path, None, home=tmp_path) is None
    assert user_environment(tmp_path, BundleBuilder(), EnvSettings()) is None
    own = user_environment(
        tmp_path,
        BundleBuilder(),
        EnvSettings(bundle_path="vendor/bundle", ruby="/opt/ruby-3.3/bin/ruby"),
    )
    assert own is not None
    assert own.dirs == (str(tmp_path / "vendor" / "bundle"), "/opt/ruby-3.3")
    assert own.env["BUNDLE_PATH"] == str(tmp_path / "vendor" / "bundle")
    assert "BUNDLE_GEMFILE" not in own.env  # found from the run's directory (a copy too)
    assert own.env["PATH"].startswith("/opt/ruby-3.3/bin:")
