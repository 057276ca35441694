"""A pull request's changed lines per file, from git: what is worked on, and why the rest is not.

:func:`read_changes` diffs the merge base against the head (``base...head``) through the
hardened git (no textconv, no external diff, no repository hooks). Files are skipped, each
with its reason, when there is nothing to test (deleted, renamed or mode change only, binary,
a symbolic link or submodule), when a path is unsafe, or when the file is generated or
vendored (:mod:`tasks.premerge.generated`). What remains is then narrowed to the project's
sources and cut to the budget by :func:`within_budget`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.setting_groups import PremergeSettings
from tasks.keep.git_safe import NO_DIFF_PROGRAMS, GitError, run_git
from tasks.premerge.diff import (
    SUBMODULE_MODE,
    SYMLINK_MODE,
    ChangeStatus,
    FileChange,
    parse_diff,
)
from tasks.premerge.generated import generated_by_content, generated_by_name

log = logging.getLogger(__name__)

#: The most bytes of a file read to find a generated header.
HEAD_BYTES = 4096
DIFF_TIMEOUT_S = 300.0


class ChangedFile(BaseModel):
    """One file the pull request changed, as the run sees it."""

    path: str = Field(description="Project-relative path on the head")
    status: ChangeStatus
    old_path: str | None = None
    lines: list[int] = Field(
        default_factory=list, description="Added or changed lines worked on (after the budget)"
    )
    skipped: str | None = Field(None, description="Why it is not worked on (None: it is)")
    cut: int = Field(0, description="Changed lines left out by the budget")


class ChangeSet(BaseModel):
    """The pull request's changes: its commits and every changed file."""

    base: str
    head: str
    merge_base: str
    files: list[ChangedFile] = Field(default_factory=list)

    @property
    def worked(self) -> list[ChangedFile]:
        """The files whose changed lines are worked on."""
        return [f for f in self.files if f.skipped is None]

    def skip(self, path: str, reason: str) -> None:
        """Mark `path` as not worked on, with `reason` (a later reason never replaces one)."""
        for f in self.files:
            if f.path == path and f.skipped is None:
                f.skipped = reason


def _diff_text(root: Path, merge_base: str, head: str) -> str:
    argv = [
        "diff",
        *NO_DIFF_PROGRAMS,
        "--no-color",
        "--no-relative",
        "-M",
        "-U0",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--end-of-options",
        merge_base,
        head,
        "--",
    ]
    done = run_git(argv, cwd=root, timeout=DIFF_TIMEOUT_S)
    return done.stdout.decode("utf-8", "replace")


def _head_of(root: Path, head: str, path: str) -> bytes:
    done = run_git(["cat-file", "blob", f"{head}:{path}"], cwd=root, check=False)
    return done.stdout[:HEAD_BYTES] if done.returncode == 0 else b""


def _nothing_to_test(change: FileChange) -> str | None:
    if change.unsafe:
        return f"unsafe path: {change.unsafe}"
    if change.status == "deleted":
        return "deleted"
    if change.binary:
        return "binary"
    mode = change.new_mode or ""
    if mode == SYMLINK_MODE:
        return "a symbolic link"
    if mode == SUBMODULE_MODE:
        return "a submodule"
    if not change.lines:
        if change.mode_changed:
            return f"mode change only ({change.old_mode} -> {change.new_mode})"
        if change.status in ("renamed", "copied"):
            return f"{change.status} only, no line changed"
        return "no added or changed line"
    return None


def _in_project(path: str, sub: str) -> str | None:
    if not sub:
        return path
    return path[len(sub) + 1 :] if path.startswith(sub + "/") else None


def classify(changes: list[FileChange], sub: str, skip_globs: Collection[str]) -> list[ChangedFile]:
    """The changed files of the project at `sub` ("" the root), each with why it is skipped
    (None: its lines are worked on, unless its content says it is generated)."""
    out: list[ChangedFile] = []
    for change in changes:
        rel = _in_project(change.path, sub)
        if rel is None:
            continue  # outside the project: another project's change
        old = _in_project(change.old_path, sub) if change.old_path else None
        out.append(
            ChangedFile(
                path=rel,
                status=change.status,
                old_path=old or change.old_path,
                lines=list(change.lines),
                skipped=_nothing_to_test(change) or generated_by_name(rel, skip_globs),
            )
        )
    return out


def read_changes(
    root: Path, base: str, head: str, merge_base: str, sub: str, settings: PremergeSettings
) -> ChangeSet:
    """The changes from `merge_base` to `head` in the repository at `root`, classified.

    Args:
        root: the repository (its object database only is read).
        base, head: the pull request's commits (full shas).
        merge_base: where the head left the base (:func:`tasks.ci_inputs.merge_base`).
        sub: the project's directory in the repository ("" at the root).
        settings: the ``[premerge]`` settings (further globs to skip).

    Raises:
        GitError: git could not diff the two commits (one line).
    """
    try:
        changes = parse_diff(_diff_text(root, merge_base, head))
    except GitError as exc:
        raise GitError(f"cannot diff {merge_base[:12]}...{head[:12]}: {exc}") from None
    files = classify(changes, sub, settings.skip)
    for f in files:
        if f.skipped is None:
            f.skipped = generated_by_content(_head_of(root, head, f"{sub}/{f.path}".lstrip("/")))
    log.info(
        "%d file(s) changed, %d with lines to test", len(files), sum(not f.skipped for f in files)
    )
    return ChangeSet(base=base, head=head, merge_base=merge_base, files=files)


def within_budget(
    changes: ChangeSet, sources: Collection[str], max_lines: int, max_files: int
) -> ChangeSet:
    """`changes` narrowed to the project's `sources` and cut to the budget: files are taken in
    the diff's order, each whose changed lines fit in what is left of `max_lines` (a first one
    larger than the whole budget keeps its first `max_lines` lines), at most `max_files` of
    them; every other file is listed with its reason. Returns a new change set."""
    out = changes.model_copy(deep=True)
    left, taken = max_lines, 0
    for f in out.files:
        if f.skipped is not None:
            continue
        if f.path not in sources:
            f.skipped = "not a source file (tests, docs, configuration)"
        elif taken >= max_files:
            f.skipped = f"beyond the budget of {max_files} files"
        elif len(f.lines) <= left:
            left, taken = left - len(f.lines), taken + 1
        elif taken == 0:
            f.cut, f.lines = len(f.lines) - left, f.lines[:left]
            left, taken = 0, 1
        else:
            f.skipped = f"beyond the budget of {max_lines} changed lines"
    return out
