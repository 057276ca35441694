"""What git will write for a repair patch, read from git itself, never from the diff's headers.

A diff's headers are the author's claim: ``x/``/``y/`` prefixes, ``-p0`` paths, renames, copies,
mode lines and ``/dev/null`` sides all mean what ``git apply`` makes of them, which is not what
a hand-written reader makes of them. So the patch is applied with ``git apply --cached`` to a
scratch index holding the base commit (nothing is checked out, the user's index is untouched),
the resulting tree is written, and the change is read back with ``git diff-tree`` (paths,
statuses, modes, blobs; renames as a deletion plus an addition, so both sides are judged) and
``--numstat`` (line counts, binaries). The risk rules run on those paths, the sandbox re-run
gets the same tree, and the commit is checked against it: what is committed is what was audited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tasks.keep.git import open_repo, scratch_index
from tasks.keep.git_safe import NO_DIFF_PROGRAMS, GitError, git_text, run_git
from tasks.repair.risk import PatchInfo

#: Modes git writes for a symbolic link and a submodule (gitlink).
SYMLINK_MODE, GITLINK_MODE = "120000", "160000"


@dataclass(frozen=True)
class Change:
    """One path's change between two trees, as ``git diff-tree --raw --no-renames`` says."""

    status: str  # A, M, D or T
    old_mode: str
    new_mode: str
    sha: str  # the new blob (all zeros when deleted)


@dataclass
class GitView:
    """A patch as git applies it on the base commit."""

    tree: str
    changes: dict[str, Change] = field(default_factory=dict)  # repository-relative paths
    info: PatchInfo = field(default_factory=PatchInfo)  # project-relative, for the risk rules


def apply_args(sub: str, *, cached: bool, reverse: bool = False, check: bool = False) -> list[str]:
    """``git apply`` arguments shared by the audit, the sandbox worktree and the commit."""
    args = ["apply", "--whitespace=nowarn"]
    if sub:
        args.append(f"--directory={sub}")
    args += ["--cached"] if cached else ["--index"]
    if reverse:
        args.append("--reverse")
    if check:
        args.append("--check")
    return [*args, "-"]


def patch_bytes(diff: str) -> bytes:
    """The diff as git reads it from stdin (with the final newline git requires)."""
    return (diff if diff.endswith("\n") else diff + "\n").encode("utf-8", errors="surrogateescape")


def tree_changes(top: Path, old: str, new: str) -> dict[str, Change]:
    """Every path that differs between the trees `old` and `new` (no rename detection)."""
    out = run_git(["diff-tree", "-r", "-z", "--no-renames", old, new], cwd=top).stdout
    parts = out.decode("utf-8", errors="surrogateescape").split("\0")
    changes: dict[str, Change] = {}
    for meta, path in zip(parts[0::2], parts[1::2], strict=False):
        fields = meta.lstrip(":").split()
        if len(fields) != 5:
            continue
        old_mode, new_mode, _old_sha, new_sha, status = fields
        changes[path] = Change(status[:1], old_mode, new_mode, new_sha)
    return changes


def _numstat(top: Path, old: str, new: str) -> dict[str, tuple[int, int] | None]:
    """Added and removed lines per path; None for a binary change."""
    out = run_git(["diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new], cwd=top).stdout
    stats: dict[str, tuple[int, int] | None] = {}
    for item in out.decode("utf-8", errors="surrogateescape").split("\0"):
        added, _, rest = item.partition("\t")
        removed, _, path = rest.partition("\t")
        if not path:
            continue
        stats[path] = (int(added), int(removed)) if added.isdigit() else None
    return stats


def _line_texts(top: Path, old: str, new: str, path: str) -> tuple[list[str], list[str]]:
    """The added and removed line texts of one path (for the weakened-test check)."""
    argv = ["diff-tree", "-p", "-U0", "--no-color", *NO_DIFF_PROGRAMS, old, new, "--", path]
    text = run_git(argv, cwd=top).stdout.decode("utf-8", errors="replace")
    added: list[str] = []
    removed: list[str] = []
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            added.append(line[1:])
        elif in_hunk and line.startswith("-"):
            removed.append(line[1:])
        elif not line.startswith((" ", "\\")):
            in_hunk = False
    return added, removed


def _project_path(path: str, sub: str) -> str | None:
    if not sub:
        return path
    return path[len(sub) + 1 :] if path.startswith(sub + "/") else None


def describe(top: Path, sub: str, old: str, new: str) -> tuple[dict[str, Change], PatchInfo]:
    """The change from tree `old` to tree `new`, and what the risk rules need to know of it
    (the added and removed lines of every changed file: the rules read the tests')."""
    changes = tree_changes(top, old, new)
    stats = _numstat(top, old, new)
    info = PatchInfo()
    for path, change in changes.items():
        rel = _project_path(path, sub)
        if rel is None:
            info.problems.append(f"{path!r}: outside the project {sub}/")
            continue
        info.files.append(rel)
        if change.status == "D":
            info.deleted.append(rel)
        if SYMLINK_MODE in (change.old_mode, change.new_mode):
            info.problems.append(f"{rel}: symbolic links are not allowed in a repair patch")
        if GITLINK_MODE in (change.old_mode, change.new_mode):
            info.problems.append(f"{rel}: submodules are not allowed in a repair patch")
        counts = stats.get(path, (0, 0))
        if counts is None:
            info.problems.append(f"{rel}: binary diffs are not allowed in a repair patch")
            continue
        info.added_lines += counts[0]
        info.removed_lines += counts[1]
        if change.status == "T" or (change.status == "M" and change.old_mode != change.new_mode):
            info.mode_changes.append(f"{rel}: mode {change.old_mode} -> {change.new_mode}")
        elif change.status == "A" and change.new_mode == "100755":
            info.mode_changes.append(f"{rel}: added as an executable file")
        if change.status != "D":
            added, removed = _line_texts(top, old, new, path)
            info.added_text[rel], info.removed_text[rel] = added, removed
    if not changes:
        info.problems.append("the patch changes nothing")
    return changes, info


def git_view(repo_root: Path, sub: str, base_commit: str, diff: str) -> GitView | str:
    """`diff` as git applies it on `base_commit` (paths under `sub`), or why it does not apply.

    Raises:
        GitError: git itself failed (not the patch).
    """
    top = Path(str(open_repo(repo_root).working_tree_dir))
    base_tree = git_text(["rev-parse", "--verify", f"{base_commit}^{{tree}}"], cwd=top)
    with scratch_index(top, base_tree) as env:
        done = run_git(
            apply_args(sub, cached=True), cwd=top, env=env, input=patch_bytes(diff), check=False
        )
        if done.returncode != 0:
            return _apply_error(done.stderr)
        tree = git_text(["write-tree"], cwd=top, env=env)
    changes, info = describe(top, sub, base_tree, tree)
    return GitView(tree=tree, changes=changes, info=info)


def symlinks_in_base(repo_root: Path, sub: str, base_commit: str, paths: list[str]) -> list[str]:
    """The project-relative `paths` that are symbolic links in `base_commit` (a patch through
    one would write wherever the link points)."""
    if not paths:
        return []
    top = Path(str(open_repo(repo_root).working_tree_dir))
    full = [f"{sub}/{p}" if sub else p for p in paths]
    out = run_git(["ls-tree", "-z", base_commit, "--", *full], cwd=top, check=False).stdout
    links = []
    for entry in out.decode("utf-8", errors="surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.split(" ")[0] == SYMLINK_MODE:
            links.append(_project_path(path, sub) or path)
    return links


def _apply_error(stderr: bytes) -> str:
    text = stderr.decode("utf-8", errors="replace").strip()
    lines = [re.sub(r"^(error|fatal): ", "", ln) for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[:4]) or "git apply failed"


def apply_to_worktree(wt: Path, sub: str, diff: str, expected_tree: str) -> str | None:
    """Apply `diff` in the worktree `wt` (index and files) and check that it holds exactly the
    audited tree; returns None, or why not."""
    done = run_git(apply_args(sub, cached=False), cwd=wt, input=patch_bytes(diff), check=False)
    if done.returncode != 0:
        return _apply_error(done.stderr)
    try:
        tree = git_text(["write-tree"], cwd=wt)
    except GitError as exc:
        return str(exc)
    if tree != expected_tree:
        return f"the worktree holds tree {tree[:12]}, not the audited {expected_tree[:12]}"
    return None


def same_change(
    top: Path, parent_tree: str, new_tree: str, audited_base: str, audited_tree: str
) -> str | None:
    """None when the step `parent_tree` -> `new_tree` changes exactly the paths the audit saw
    (`audited_base` -> `audited_tree`) with the same modes and, for paths no earlier step
    touched (`parent_tree` equal to the base there), the same content; else why not."""
    got = tree_changes(top, parent_tree, new_tree)
    want = tree_changes(top, audited_base, audited_tree)
    if set(got) != set(want):
        extra = sorted(set(got) ^ set(want))
        return f"the commit would change other paths than the audit saw: {', '.join(extra[:5])}"
    earlier = tree_changes(top, audited_base, parent_tree)
    for path, change in got.items():
        audited = want[path]
        if (change.status, change.new_mode) != (audited.status, audited.new_mode):
            return f"{path}: committed as {change.status} {change.new_mode}, audited otherwise"
        if path not in earlier and change.sha != audited.sha:
            return f"{path}: the committed content is not the audited one"
    return None


__all__ = [
    "GITLINK_MODE",
    "SYMLINK_MODE",
    "Change",
    "GitView",
    "apply_args",
    "apply_to_worktree",
    "describe",
    "git_view",
    "patch_bytes",
    "same_change",
    "symlinks_in_base",
    "tree_changes",
]
