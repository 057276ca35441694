"""Host-side git never trusts a tree the sandbox wrote: real git, real worktrees, real bwrap.

Each attack plants a command git would run (fsmonitor, textconv, a hook, an ext:: transport)
that would create a marker file on the host; the marker must never appear."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.keep.git import resolve_commit, worktree
from tasks.keep.git_safe import GitError, TamperedWorktreeError, run_git
from tasks.repair.roles import git_changes
from tasks.sandbox.make import make_runner
from tasks.toolchains.mapping import map_repo
from tests.examples_repo import git

pytestmark = pytest.mark.slow


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "app").mkdir(parents=True)
    (r / "app" / "a.rb").write_text("one\n")
    (r / "Gemfile").write_text("")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", ".")
    git(r, "commit", "-qm", "first")
    (r / "app" / "a.rb").write_text("two\n")
    git(r, "commit", "-qam", "second: change a.rb")
    return r


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def evil_script(tmp_path: Path, marker: Path) -> Path:
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch {marker}\ncat "$@" 2>/dev/null\n')
    script.chmod(0o755)
    return script


def evil_gitdir(where: Path, script: Path, real_gitdir: str) -> Path:
    """A git dir whose configuration runs `script` from every hook git might consult."""
    fake = where / "fake-gitdir"
    shutil.copytree(real_gitdir, fake, symlinks=True)
    (fake / "commondir").unlink(missing_ok=True)
    config = f'[core]\n\tfsmonitor = {script}\n\tpager = {script}\n[diff "evil"]\n'
    config += f"\ttextconv = {script}\n\tcommand = {script}\n"
    (fake / "config").write_text(config)
    return fake


def test_a_rewritten_worktree_link_stops_every_git_command(
    repo: Path, tmp_path: Path, marker: Path
) -> None:
    script = evil_script(tmp_path, marker)
    with worktree(repo, "HEAD") as wt:
        real = (wt / ".git").read_text().split(":", 1)[1].strip()
        # The sandbox can write the worktree: it points .git at a configuration of its own.
        runner = make_runner(SandboxSettings(backend="bwrap"), wt, cache_dir=tmp_path / "c")
        fake_gitdir = evil_gitdir(tmp_path, script, real)
        shutil.copytree(fake_gitdir, wt / "planted", symlinks=True)
        done = runner.run(["sh", "-c", "echo 'gitdir: planted' > .git"], cwd=wt)
        assert done.exit_code == 0, done.stderr
        (wt / ".gitattributes").write_text("*.rb diff=evil\n")
        for attempt in (
            lambda: git_changes(wt, ["app/a.rb"]),
            lambda: map_repo(wt, "ruby-rspec"),
            lambda: run_git(["status"], cwd=wt / "app"),
        ):
            with pytest.raises(TamperedWorktreeError, match=r"worktree's \.git link was changed"):
                attempt()
    assert not marker.exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_git_dir_planted_below_the_worktree_is_never_used(
    repo: Path, tmp_path: Path, marker: Path
) -> None:
    script = evil_script(tmp_path, marker)
    with worktree(repo, "HEAD") as wt:
        real = (wt / ".git").read_text().split(":", 1)[1].strip()
        # A project in a subdirectory gets a .git of its own (git would discover it first).
        planted = evil_gitdir(tmp_path, script, real)
        shutil.copytree(planted, wt / "app" / ".git", symlinks=True)
        (wt / ".gitattributes").write_text("*.rb diff=evil\n")
        history = git_changes(wt / "app", ["a.rb"])
        map_repo(wt / "app", "ruby-rspec")  # lists files with git: the planted dir is ignored
    assert "second: change a.rb" in history and "+two" in history
    assert not marker.exists()


def test_textconv_and_external_diff_of_the_repository_never_run(
    repo: Path, tmp_path: Path, marker: Path
) -> None:
    script = evil_script(tmp_path, marker)
    git(repo, "config", "diff.evil.textconv", str(script))
    git(repo, "config", "diff.evil.command", str(script))
    (repo / ".gitattributes").write_text("*.rb diff=evil\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "attributes")
    with worktree(repo, "HEAD") as wt:
        history = git_changes(wt, ["app/a.rb"])
    assert "+two" in history
    assert not marker.exists()


def test_hooks_ext_transport_and_the_callers_git_variables_are_ignored(
    repo: Path, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = evil_script(tmp_path, marker)
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\n{script}\n")
    hook.chmod(0o755)
    # Started from a hook of another repository, Autopilot inherits its GIT_DIR.
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(script))
    head = resolve_commit(repo)
    with worktree(repo, head) as wt:
        assert (wt / "app" / "a.rb").read_text() == "two\n"
        run_git(["diff", "--no-ext-diff", "HEAD~1"], cwd=wt)
    with pytest.raises(GitError):
        run_git(["ls-remote", f"ext::sh -c {script}% >&2"], cwd=repo, timeout=30)
    assert not marker.exists()


def test_pushing_keeps_the_users_transport(repo: Path, tmp_path: Path) -> None:
    from tasks.keep.git import push_branch

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "branch", "autopilot/x")
    push_branch(repo, "autopilot/x")
    assert git(remote, "rev-parse", "autopilot/x").strip() == resolve_commit(repo)
