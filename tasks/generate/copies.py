"""Private copies of a project for the file jobs, made once per run and re-used.

Each target works in its own copy of the project: a draft that does not load, or a new factory,
must never break another target's runs that happen at the same time. The copy leaves out git
metadata and machine state (caches, coverage, logs).

Copying the project for every job costs as much as the project is large, for every file: at
300 modules, copying and deleting a copy per file took about a quarter of the flow process's
CPU. A :class:`CopyPool` keeps a run's copies instead. A returned copy is put back to the state
it was made in before another job takes it: every entry the job created is removed, and every
entry it changed, replaced or removed is copied again from the project. A copy that cannot be
put back (an entry it cannot remove or restore) is deleted, and the next job gets a new one.

"Changed" compares each entry's type and mode, inode, size, modification time and change time
(ctime) with what they were after the copy. Every write, truncation, chmod, link or rename
updates the ctime, and no process can set it back (``utime`` sets the modification time only),
so a test that rewrites a file and restores its modification time is still seen; a file deleted
and created again is a new ctime too. A copy is only ever reset between jobs, when no sandboxed
command runs in it.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from tasks.toolchains import registry
from tasks.toolchains.runs import SCRATCH_DIR, scratch_base

log = logging.getLogger(__name__)

__all__ = ["CopyPool", "copy_project", "lease_copy", "project_copies"]

#: Left out of a target's copy anywhere in the tree (machine state, not project content).
#: (with every toolchain's caches, ``Toolchain.cache_dirs``).
_SKIP_ANYWHERE = frozenset({".git", SCRATCH_DIR, "node_modules"})


def copy_project(project: Path, parent: Path) -> Path:
    """A private copy of `project` under `parent` (git metadata and machine state left out)."""
    root = project.resolve()
    anywhere = _SKIP_ANYWHERE | registry.cache_dirs()
    top = registry.output_paths()  # the stacks' run outputs (Rails' tmp/ and log/, coverage)

    def ignore(directory: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n in anywhere}
        if Path(directory).resolve() == root:
            skip |= {n for n in names if n in top}
        return skip

    dest = parent / "project"
    shutil.copytree(root, dest, ignore=ignore, symlinks=True)
    # The worktree's prepare commands ran once (their markers say so): so did the copy's.
    for marker in (root / SCRATCH_DIR).glob("prepared-*"):
        shutil.copy2(marker, scratch_base(dest) / marker.name)
    return dest


class _Entry(NamedTuple):
    """What decides whether an entry of a copy is still as it was made."""

    mode: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> _Entry:
        if stat.S_ISDIR(st.st_mode):
            # A directory's times change with its entries, which are compared one by one.
            return cls(st.st_mode, 0, 0, 0, 0)
        return cls(st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Copy:
    """One copy: its temporary directory and the state of every entry as it was made."""

    def __init__(self, project: Path) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="autopilot-gen-")
        self.path = copy_project(project, Path(self._tmp.name))
        self.state: dict[str, _Entry] = {}
        self.root_mode = self.path.stat().st_mode
        for rel, st in _walk(self.path):
            self.state[rel] = _Entry.of(st)

    def discard(self) -> None:
        try:
            self._tmp.cleanup()  # also clears permissions a test took away
        except (OSError, RecursionError) as exc:
            log.warning("copy %s not fully deleted: %s", self.path, exc)


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under `root` (not following links), parents before their entries."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                yield rel, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)


def _remove(path: Path, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def reset_copy(copy: _Copy, project: Path) -> int:
    """Put `copy` back to its state as made from `project`; the number of entries it fixed.

    Raises:
        OSError: an entry could not be removed or restored (the copy is then unusable).
    """
    root, state = copy.path, copy.state
    if root.stat().st_mode != copy.root_mode:
        os.chmod(root, stat.S_IMODE(copy.root_mode))
    seen: set[str] = set()
    fixed = 0
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as entries:
            listed = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
        for name, st in listed:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            known = state.get(rel)
            if known is not None and stat.S_ISDIR(st.st_mode) and stat.S_ISDIR(known.mode):
                if st.st_mode != known.mode:
                    os.chmod(root / rel, stat.S_IMODE(known.mode))
                    fixed += 1
                seen.add(rel)
                stack.append(rel)
            elif known is None or _Entry.of(st) != known:
                _remove(root / rel, st)  # created by the job, or changed: restored below
                fixed += 1
            else:
                seen.add(rel)
    source = project.resolve()
    for rel in sorted(state.keys() - seen):  # parents sort before their entries
        _restore(source, root, rel, state)
        fixed += 1
    return fixed


def _restore(source: Path, root: Path, rel: str, state: dict[str, _Entry]) -> None:
    """Make `rel` in the copy at `root` again as it was made (a directory empty: its entries
    are restored after it)."""
    dest = root / rel
    if stat.S_ISDIR(state[rel].mode):
        dest.mkdir()
        os.chmod(dest, stat.S_IMODE(state[rel].mode))
    else:
        # copy_project's scratch markers are at the same place in the project.
        shutil.copy2(source / rel, dest, follow_symlinks=False)
    state[rel] = _Entry.of(dest.lstat())


class CopyPool:
    """The copies of one project a run's file jobs take in turn (as many as run at once)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self._free: list[_Copy] = []
        self._lock = threading.Lock()
        self._closed = False
        self.made = 0

    @contextmanager
    def lease(self) -> Iterator[Path]:
        """A copy in the project's state, for the caller alone until the block ends."""
        with self._lock:
            copy = self._free.pop() if self._free else None
        if copy is None:
            copy = _Copy(self.project)
            with self._lock:
                self.made += 1
        try:
            yield copy.path
        finally:
            self._give_back(copy)

    def _give_back(self, copy: _Copy) -> None:
        try:
            fixed = reset_copy(copy, self.project)
        except (OSError, RecursionError) as exc:  # RecursionError: a tree too deep for rmtree
            log.warning("a copy of %s could not be reset (%s): deleted", self.project, exc)
            copy.discard()
            return
        log.debug("copy %s reset (%d entries)", copy.path, fixed)
        with self._lock:
            if not self._closed:
                self._free.append(copy)
                return
        copy.discard()

    def close(self) -> None:
        """Delete every copy not in use (one in use is deleted when it comes back)."""
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
        for copy in free:
            copy.discard()


_POOLS: dict[Path, CopyPool] = {}
_POOLS_LOCK = threading.Lock()


@contextmanager
def project_copies(project: Path) -> Iterator[CopyPool]:
    """Re-use copies of `project` for the file jobs of this process until the block ends."""
    key = project.resolve()
    pool = CopyPool(project)
    with _POOLS_LOCK:
        if key in _POOLS:
            raise RuntimeError(f"copies of {project} are already pooled")
        _POOLS[key] = pool
    try:
        yield pool
    finally:
        with _POOLS_LOCK:
            del _POOLS[key]
        pool.close()


@contextmanager
def lease_copy(project: Path) -> Iterator[Path]:
    """A private copy of `project`: from its pool when a run opened one in this process
    (:func:`project_copies`), else made for the block alone and deleted after it."""
    with _POOLS_LOCK:
        pool = _POOLS.get(project.resolve())
    if pool is not None:
        with pool.lease() as path:
            yield path
        return
    with tempfile.TemporaryDirectory(prefix="autopilot-gen-") as tmp:
        yield copy_project(project, Path(tmp))
