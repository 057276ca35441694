"""A pull request's base and head made present in a CI clone: a branch the clone lacks fetched
by name, a pull request's ref fetched, a shallow clone deepened for the merge base, and refs
that cannot be had one line each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.ci_inputs import ensure_ref, merge_base
from tasks.keep.git_safe import GitError
from tests.examples_repo import git


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A bare remote with main (two commits) and a feature branch on top of it."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for i in range(2):
        (work / "a.txt").write_text(f"{i}\n")
        git(work, "add", "-A")
        git(work, "commit", "-qm", f"main {i}")
    git(work, "switch", "-q", "-c", "feature")
    (work / "b.txt").write_text("b\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "feature")
    bare = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    git(bare, "update-ref", "refs/pull/7/head", "feature")
    return bare


def _clone(origin: Path, dest: Path, *args: str) -> Path:
    git(origin.parent, "clone", "-q", *args, f"file://{origin}", str(dest))
    return dest


def test_a_base_branch_the_clone_lacks_is_fetched_by_name(origin: Path, tmp_path: Path) -> None:
    clone = _clone(origin, tmp_path / "ci", "--single-branch", "--branch", "feature")
    assert "origin/main" not in git(clone, "branch", "-r")
    head = ensure_ref(clone, "HEAD")
    base = ensure_ref(clone, "main")
    assert (head.how, base.how) == ("present", "fetched by name")
    assert base.sha == git(origin, "rev-parse", "main").strip()
    assert ensure_ref(clone, "origin/main").how == "present"
    pull = ensure_ref(clone, "refs/pull/7/head")
    assert pull.fetched and pull.sha == head.sha
    assert merge_base(clone, base.sha, head.sha) == base.sha


def test_a_shallow_clone_is_deepened_for_the_merge_base(origin: Path, tmp_path: Path) -> None:
    clone = _clone(origin, tmp_path / "ci", "--depth", "1", "--branch", "feature")
    head = ensure_ref(clone, "HEAD").sha
    base = ensure_ref(clone, "main").sha  # fetched, still shallow: no common history yet
    assert merge_base(clone, base, head) == git(origin, "rev-parse", "main").strip()


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no-such-branch", "fetching"),
        ("-upload-pack=touch /tmp/x", "not a valid ref"),
        ("main..evil", "not a valid ref"),
        ("a b", "not a valid ref"),
        ("", "not a valid ref"),
    ],
)
def test_refs_that_cannot_be_had_are_one_line(
    origin: Path, tmp_path: Path, ref: str, message: str
) -> None:
    clone = _clone(origin, tmp_path / "ci", "--single-branch", "--branch", "feature")
    with pytest.raises(GitError, match=message) as err:
        ensure_ref(clone, ref)
    assert "\n" not in str(err.value)


def test_histories_without_a_common_commit_are_one_line(origin: Path, tmp_path: Path) -> None:
    clone = _clone(origin, tmp_path / "ci")
    git(clone, "switch", "-q", "--orphan", "alone")
    (clone / "c.txt").write_text("c\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "alone")
    with pytest.raises(GitError, match="no merge base"):
        merge_base(clone, ensure_ref(clone, "alone").sha, ensure_ref(clone, "main").sha)
