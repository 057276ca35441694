"""Git's patch output read as typed changes: from real git (renames, deletions, binary files,
mode changes, a path with spaces, a quoted path, CRLF lines) and from text a hostile diff could
hold (a path leaving the repository, a content line dressed as a header, a truncated hunk)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.premerge.diff import parse_diff, path_problem, unquote
from tests.examples_repo import git


def _diff(repo: Path) -> str:
    done = subprocess.run(
        [
            "git",
            "diff",
            "--no-color",
            "-M",
            "-U0",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "HEAD~1",
            "HEAD",
        ],
        cwd=repo,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8", "replace")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A base commit, then a head that renames, deletes, edits, adds and chmods files."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "old name.py").write_text("one\ntwo\nthree\nfour\nfive\n")
    (repo / "crlf.py").write_bytes(b"x\r\ny\r\n")
    (repo / "gone.py").write_text("del\n")
    (repo / "bin.dat").write_bytes(b"\x00\x01")
    (repo / "run.sh").write_text("echo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "mv", "old name.py", "new name.py")
    (repo / "new name.py").write_text("one\ntwo\nTHREE\nfour\nfive\nsix\n")
    git(repo, "rm", "-q", "gone.py")
    (repo / "crlf.py").write_bytes(b"x\r\nY\r\nz\r\n")
    (repo / "bin.dat").write_bytes(b"\x00\x02")
    (repo / "run.sh").chmod(0o755)
    (repo / "é t.py").write_text("é\n")
    (repo / 'we"ird.py').write_text("q\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")
    return repo


def test_real_git_changes_are_read_whatever_the_file(repo: Path) -> None:
    changes = {c.path: c for c in parse_diff(_diff(repo))}
    assert set(changes) == {
        "bin.dat",
        "crlf.py",
        "gone.py",
        "new name.py",
        "run.sh",
        "é t.py",
        'we"ird.py',
    }
    renamed = changes["new name.py"]
    assert (renamed.status, renamed.old_path, renamed.lines) == ("renamed", "old name.py", [3, 6])
    assert (changes["gone.py"].status, changes["gone.py"].lines) == ("deleted", [])
    assert changes["bin.dat"].binary and changes["bin.dat"].lines == []
    mode = changes["run.sh"]
    assert mode.mode_changed and (mode.old_mode, mode.new_mode) == ("100644", "100755")
    assert mode.lines == []
    # A CRLF file: the \r stays in its lines, the numbers are the file's.
    assert changes["crlf.py"].lines == [2, 3]
    assert (changes["é t.py"].status, changes["é t.py"].lines) == ("added", [1])
    assert changes['we"ird.py'].lines == [1]
    assert all(c.unsafe is None for c in changes.values())


def test_a_diff_saved_with_crlf_line_ends_reads_the_same(repo: Path) -> None:
    text = _diff(repo)
    assert parse_diff(text.replace("\n", "\r\n")) == parse_diff(text)


def test_context_lines_do_not_count_as_changed() -> None:
    text = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n"
        "@@ -1,4 +1,5 @@\n one\n-two\n+TWO\n+two and a half\n three\n four\n"
        "\\ No newline at end of file\n"
    )
    [change] = parse_diff(text)
    assert change.lines == [2, 3]


def test_a_content_line_dressed_as_a_header_is_content() -> None:
    text = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -0,0 +1,3 @@\n"
        "++++ b/../../etc/passwd\n+rename to /root/x\n+diff --gitx\n"
    )
    [change] = parse_diff(text)
    assert (change.path, change.lines, change.unsafe) == ("a.py", [1, 2, 3], None)


def test_a_truncated_hunk_keeps_what_was_read() -> None:
    text = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -0,0 +1,5 @@\n+a\n+b\n"
    assert parse_diff(text)[0].lines == [1, 2]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../outside.py", ".."),
        ("src/../../outside.py", ".."),
        ("/etc/passwd", "absolute"),
        ("C:\\\\Windows\\\\x.py", "absolute"),
        (".git/hooks/pre-commit", ".git"),
        ("src/.GIT/config", ".git"),
        ("a\nb.py", "control character"),
        ("src//x.py", "empty"),
    ],
)
def test_a_path_that_leaves_the_repository_is_unsafe(path: str, problem: str) -> None:
    assert problem in (path_problem(path) or "")
    quoted = '"b/' + path.replace("\\", "\\\\").replace("\n", "\\n") + '"'
    text = (
        f"diff --git a/x {quoted}\nnew file mode 100644\n--- /dev/null\n+++ {quoted}\n"
        "@@ -0,0 +1 @@\n+x\n"
    )
    [change] = parse_diff(text)
    assert change.unsafe is not None and problem in change.unsafe


def test_a_rename_onto_a_path_outside_is_unsafe() -> None:
    text = (
        "diff --git a/ok.py b/../evil.py\nsimilarity index 100%\n"
        "rename from ok.py\nrename to ../evil.py\n"
    )
    [change] = parse_diff(text)
    assert (change.status, change.old_path, change.path) == ("renamed", "ok.py", "../evil.py")
    assert change.unsafe is not None


def test_quoted_paths_are_unquoted() -> None:
    assert unquote('"a\\tb\\303\\251\\"q\\\\"') == 'a\tbé"q\\'
    assert unquote("plain name.py") == "plain name.py"
    assert unquote('"\\q"') == "\\q"


def test_garbage_is_no_change() -> None:
    assert parse_diff("") == []
    assert parse_diff("not a diff\n@@ -1 +1 @@\n+x\n") == []
