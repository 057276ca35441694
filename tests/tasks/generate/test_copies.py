"""The file jobs' project copies: re-used within a run, and put back exactly as made.

A re-used copy must be indistinguishable from a new one: whatever a job (or a test it ran in the
sandbox) created, changed or removed is undone before the next job takes the copy.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.generate.copies import CopyPool, copy_project, lease_copy, project_copies
from tasks.sandbox.make import make_runner
from tasks.toolchains.runs import SCRATCH_DIR


def _project(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "src" / "pkg" / "core.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / "tests" / "test_core.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    script = root / "bin" / "run"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    script.chmod(0o755)
    (root / "docs").symlink_to("src")
    (root / ".git").mkdir()  # left out of every copy
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    scratch = root / SCRATCH_DIR
    scratch.mkdir()
    (scratch / ".gitignore").write_text("*\n", encoding="utf-8")
    (scratch / "prepared-abc").write_text("done\n", encoding="utf-8")
    (scratch / "coverage.json").write_text("{}", encoding="utf-8")  # not a marker: left out
    return root


def _tree(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry under `root`: its kind, permission bits and content (a link's target)."""
    found: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode & 0o7777
            if path.is_symlink():
                found[rel] = ("link", mode, os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir", mode, b"")
            else:
                found[rel] = ("file", mode, path.read_bytes())
    return found


def _fresh(project: Path, tmp_path: Path) -> dict[str, tuple[str, int, bytes | str]]:
    where = tmp_path / "fresh"
    where.mkdir()
    return _tree(copy_project(project, where))


def test_a_returned_copy_is_put_back_to_a_fresh_copy(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    fresh = _fresh(project, tmp_path)
    assert "tests/test_core.py" in fresh and f"{SCRATCH_DIR}/prepared-abc" in fresh
    assert ".git" not in fresh and f"{SCRATCH_DIR}/coverage.json" not in fresh
    pool = CopyPool(project)
    with pool.lease() as copy:
        assert _tree(copy) == fresh
        core = copy / "src" / "pkg" / "core.py"
        before = core.stat()
        core.write_text("VALUE = 2\n", encoding="utf-8")  # same size, time set back
        os.utime(core, ns=(before.st_atime_ns, before.st_mtime_ns))
        (copy / "tests" / "test_new.py").write_text("def test_y():\n    pass\n")
        (copy / "tests" / "__pycache__").mkdir()
        (copy / "tests" / "__pycache__" / "x.pyc").write_bytes(b"poison")
        (copy / "bin" / "run").chmod(0o644)
        (copy / "tests" / "test_core.py").unlink()
        shutil.rmtree(copy / "src" / "pkg")
        (copy / "src" / "pkg").write_text("a file where a directory was", encoding="utf-8")
        (copy / "docs").unlink()
        (copy / "docs").symlink_to("/etc")
        (copy / "tests" / "escape").symlink_to("/")
        (copy / SCRATCH_DIR / "prepared-abc").unlink()
        (copy / SCRATCH_DIR / "run.log").write_text("log")
        (copy / "tests").chmod(0o700)
        first = copy
    with pool.lease() as again:
        assert again == first  # the same copy, re-used
        assert _tree(again) == fresh
    assert pool.made == 1
    pool.close()
    assert not first.exists()


def test_a_changed_file_is_seen_whatever_its_times_and_size_say(tmp_path: Path) -> None:
    """A file deleted and created again with the same name, size and times is still a new
    file: the copy gets the project's content back."""
    project = _project(tmp_path / "proj")
    pool = CopyPool(project)
    with pool.lease() as copy:
        core = copy / "src" / "pkg" / "core.py"
        st = core.stat()
        core.unlink()
        core.write_text("VALUE = 9\n", encoding="utf-8")
        core.chmod(st.st_mode & 0o7777)
        os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pool.lease() as copy:
        assert core.read_text(encoding="utf-8") == "VALUE = 1\n"
    pool.close()


def test_concurrent_jobs_get_different_copies(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    pool = CopyPool(project)
    barrier = threading.Barrier(3)
    seen: list[Path] = []

    def job() -> None:
        with pool.lease() as copy:
            seen.append(copy)
            barrier.wait(timeout=30)
            (copy / "tests" / "mine.txt").write_text(str(copy))

    threads = [threading.Thread(target=job) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 3 and pool.made == 3
    for copy in seen:
        assert not (copy / "tests" / "mine.txt").exists()
    pool.close()
    assert not any(copy.exists() for copy in seen)


def test_a_copy_that_cannot_be_put_back_is_replaced(tmp_path: Path) -> None:
    """The project's file is gone (nothing to restore from): the copy is deleted and the next
    job gets a new one, made from the project as it is."""
    project = _project(tmp_path / "proj")
    pool = CopyPool(project)
    with pool.lease() as copy:
        (copy / "src" / "pkg" / "core.py").write_text("changed\n", encoding="utf-8")
        (project / "src" / "pkg" / "core.py").unlink()
        first = copy
    assert not first.exists()
    with pool.lease() as copy:
        assert copy != first
        assert not (copy / "src" / "pkg" / "core.py").exists()
    assert pool.made == 2
    pool.close()


def test_lease_copy_uses_the_run_pool_and_else_a_copy_of_its_own(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    with lease_copy(project) as alone:
        assert (alone / "src" / "pkg" / "core.py").is_file()
    assert not alone.exists()
    with project_copies(project) as pool:
        with lease_copy(project) as one:
            pass
        with lease_copy(project) as two:
            pass
        assert one == two and pool.made == 1
        with pytest.raises(RuntimeError, match="already pooled"), project_copies(project):
            pass
    assert not one.exists()


def test_a_sandboxed_test_cannot_leave_anything_for_the_next_job(tmp_path: Path) -> None:
    """The attacker's case, through the real sandbox: a test rewrites a source file and sets
    its times back, drops a compiled module for the next job to import, and plants a link out;
    the next job's copy has none of it."""
    project = _project(tmp_path / "proj")
    script = """
import os, pathlib
core = pathlib.Path("src/pkg/core.py")
st = core.stat()
core.write_text("VALUE = 2\\n")
os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns))
cache = pathlib.Path("src/pkg/__pycache__")
cache.mkdir()
(cache / "core.cpython-311.pyc").write_bytes(b"poison")
os.symlink("/etc/passwd", "tests/passwd")
"""
    with project_copies(project) as pool:
        with lease_copy(project) as copy:
            runner = make_runner(SandboxSettings(backend="bwrap"), root=copy)
            result = runner.run([sys.executable, "-c", script], cwd=copy)
            assert result.exit_code == 0, result.stderr
            assert (copy / "src" / "pkg" / "core.py").read_text() == "VALUE = 2\n"
        with lease_copy(project) as again:
            assert again == copy and pool.made == 1
            assert (again / "src" / "pkg" / "core.py").read_text() == "VALUE = 1\n"
            assert not (again / "src" / "pkg" / "__pycache__").exists()
            assert not (again / "tests" / "passwd").is_symlink()
