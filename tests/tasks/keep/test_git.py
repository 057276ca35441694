"""Git helpers on real temporary repositories: the user's checkout must never change."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.core.errors import BadInputError
from tasks.keep.git import (
    BranchExistsError,
    GitError,
    commit_files_to_new_branch,
    push_branch,
    resolve_commit,
    unique_branch_name,
    worktree,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's ~/.gitconfig (hooks, signing, templates) must not influence the tests.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
        cwd=repo,
        input=input,
        capture_output=True,
        check=True,
    )
    return out.stdout.decode()


def write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A repo on `main` with two commits, then a dirty state: staged, unstaged and untracked."""
    r = tmp_path / "user-repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    write(r, {"a.txt": "a1\n", "lib/b.rb": "puts 1\n"})
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "first")
    git(r, "tag", "v1")
    write(r, {"a.txt": "a2\n", "spec/b_spec.rb": "describe B\n"})
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "second")
    write(r, {"staged.txt": "staged\n"})
    git(r, "add", "staged.txt")
    write(r, {"a.txt": "a2 edited, not staged\n", "untracked.txt": "u\n"})
    return r


def ls_tree(repo: Path, rev: str) -> dict[str, str]:
    """path -> "mode type sha" for every file of `rev`."""
    rows = (line.split("\t") for line in git(repo, "ls-tree", "-r", rev).splitlines())
    return {path: meta for meta, path in rows}


def snapshot(repo: Path) -> dict[str, object]:
    files = {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return {
        "index": (repo / ".git" / "index").read_bytes(),
        "HEAD": (repo / ".git" / "HEAD").read_bytes(),
        "head_sha": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "status": git(repo, "status", "--porcelain", "-uall"),
        "cached": git(repo, "diff", "--cached"),
        "diff": git(repo, "diff"),
        "stage": git(repo, "ls-files", "--stage"),
        "files": files,
    }


def stable_snapshot(repo: Path) -> dict[str, object]:
    # `git status` may refresh the index once; after that the snapshot must be stable.
    first = snapshot(repo)
    second = snapshot(repo)
    assert first == second or snapshot(repo) == second
    return second


def test_resolve_commit(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    first = git(repo, "rev-parse", "v1^{commit}").strip()
    assert resolve_commit(repo) == head
    assert resolve_commit(repo, "main") == head
    assert resolve_commit(repo, head[:8]) == head
    assert resolve_commit(repo, "v1") == first
    assert resolve_commit(repo / "lib", "HEAD~1") == first


@pytest.mark.parametrize("ref", ["nope", "HEAD~9", "-h", "--all", "", "main:a.txt"])
def test_resolve_commit_bad_ref(repo: Path, ref: str) -> None:
    with pytest.raises(BadInputError) as info:
        resolve_commit(repo, ref)
    assert str(repo) in str(info.value) and "\n" not in str(info.value)


def test_resolve_commit_not_a_repo(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not a git repository"):
        resolve_commit(tmp_path)
    with pytest.raises(BadInputError, match="not a git repository"):
        resolve_commit(tmp_path / "missing")


def test_worktree_is_detached_outside_and_removed(repo: Path, tmp_path: Path) -> None:
    before = stable_snapshot(repo)
    first = resolve_commit(repo, "v1")
    with worktree(repo, "v1") as wt:
        assert wt.is_dir() and not wt.is_relative_to(repo)
        assert (wt / "a.txt").read_text() == "a1\n"
        assert not (wt / "spec").exists() and not (wt / "staged.txt").exists()
        assert git(wt, "rev-parse", "HEAD").strip() == first
        assert git(wt, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"  # detached
        (wt / "a.txt").write_text("changed in the sandbox\n")
        git(wt, "add", "a.txt")
    assert not wt.exists() and not wt.parent.exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert stable_snapshot(repo) == before


def test_worktree_removed_after_exception(repo: Path) -> None:
    before = stable_snapshot(repo)
    with pytest.raises(RuntimeError, match="boom"), worktree(repo, "HEAD") as wt:
        (wt / "new.txt").write_text("x")
        raise RuntimeError("boom")
    assert not wt.exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (repo / ".git" / "worktrees").exists() or not any(
        (repo / ".git" / "worktrees").iterdir()
    )
    assert stable_snapshot(repo) == before


def test_worktree_bad_commit(repo: Path) -> None:
    with pytest.raises(BadInputError), worktree(repo, "no-such-ref"):
        pass


def test_commit_files_to_new_branch_leaves_user_state_identical(repo: Path) -> None:
    before = stable_snapshot(repo)
    base = resolve_commit(repo)
    files = {
        "spec/models/user_spec.rb": b"RSpec.describe User do\nend\n",
        "spec/factories/users.rb": b"FactoryBot.define do\nend\n",
        "a.txt": b"replaced\n",
        "data/blob.bin": b"\x00\xff\x00binary",
    }
    sha = commit_files_to_new_branch(repo, base, "autopilot/nightly-2024-05-17", files, "Add specs")

    assert stable_snapshot(repo) == before
    assert git(repo, "rev-parse", "autopilot/nightly-2024-05-17").strip() == sha
    assert git(repo, "rev-parse", f"{sha}^").strip() == base
    assert git(repo, "rev-list", "--count", f"{base}..{sha}").strip() == "1"
    changed = git(repo, "diff", "--name-only", base, sha).split()
    assert sorted(changed) == sorted(files)
    for path, data in files.items():
        shown = subprocess.run(
            ["git", "show", f"{sha}:{path}"], cwd=repo, capture_output=True, check=True
        )
        assert shown.stdout == data
    # Every other path of the base is unchanged.
    base_tree = ls_tree(repo, base)
    new_tree = ls_tree(repo, sha)
    untouched = {p: v for p, v in base_tree.items() if p not in files}
    assert {p: v for p, v in new_tree.items() if p not in files} == untouched
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn|%s", sha).strip() == (
        "Test Autopilot <autopilot@localhost>|Test Autopilot|Add specs"
    )


def test_commit_from_an_older_base(repo: Path) -> None:
    first = resolve_commit(repo, "v1")
    sha = commit_files_to_new_branch(
        repo, "v1", "fix/x", {"lib/b.rb": b"puts 2\n"}, "Fix", author=("Bot", "bot@x")
    )
    assert git(repo, "rev-parse", f"{sha}^").strip() == first
    assert git(repo, "ls-tree", "-r", "--name-only", sha).split() == ["a.txt", "lib/b.rb"]
    assert git(repo, "log", "-1", "--format=%an <%ae>", sha).strip() == "Bot <bot@x>"


@pytest.mark.parametrize("branch", ["main", "keep"])
def test_existing_branch_is_never_overwritten(repo: Path, branch: str) -> None:
    git(repo, "branch", "keep", "v1")
    old = git(repo, "rev-parse", branch)
    before = stable_snapshot(repo)
    with pytest.raises(BranchExistsError, match=f"branch '{branch}' already exists"):
        commit_files_to_new_branch(repo, "HEAD", branch, {"x.txt": b"x"}, "msg")
    assert git(repo, "rev-parse", branch) == old
    assert stable_snapshot(repo) == before


@pytest.mark.parametrize(
    ("path", "branch"),
    [("../x", "b"), (".git/config", "b"), ("/abs", "b"), ("a//b", "b"), ("ok.txt", "bad..name")],
)
def test_bad_paths_and_names_create_nothing(repo: Path, path: str, branch: str) -> None:
    with pytest.raises(BadInputError):
        commit_files_to_new_branch(repo, "HEAD", branch, {path: b"x"}, "msg")
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/").split() == [
        "refs/heads/main"
    ]


def test_unique_branch_name(repo: Path, tmp_path: Path) -> None:
    assert unique_branch_name(repo, "autopilot/fix-abc") == "autopilot/fix-abc"
    git(repo, "branch", "autopilot/fix-abc")
    assert unique_branch_name(repo, "autopilot/fix-abc") == "autopilot/fix-abc-2"
    git(repo, "branch", "autopilot/fix-abc-2")
    assert unique_branch_name(repo, "autopilot/fix-abc") == "autopilot/fix-abc-3"
    # A branch that only exists on a remote is taken too.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main:autopilot/fix-abc-3")
    git(repo, "fetch", "-q", "origin")
    assert unique_branch_name(repo, "autopilot/fix-abc") == "autopilot/fix-abc-4"
    with pytest.raises(BadInputError):
        unique_branch_name(repo, "bad name")


def test_push_branch(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    sha = commit_files_to_new_branch(repo, "HEAD", "autopilot/x", {"n.txt": b"n\n"}, "n")
    push_branch(repo, "autopilot/x")
    assert git(remote, "rev-parse", "autopilot/x").strip() == sha

    # Someone else moved the remote branch: our push is rejected, never forced.
    other = commit_files_to_new_branch(repo, "HEAD", "elsewhere", {"o.txt": b"o\n"}, "o")
    git(repo, "push", "-q", "--force", "origin", f"{other}:refs/heads/autopilot/x")
    with pytest.raises(GitError, match=r"push of 'autopilot/x' to 'origin' failed: .*rejected"):
        push_branch(repo, "autopilot/x")
    assert git(remote, "rev-parse", "autopilot/x").strip() == other
    with pytest.raises(GitError, match="nowhere"):
        push_branch(repo, "autopilot/x", remote="nowhere")
