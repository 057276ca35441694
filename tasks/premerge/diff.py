"""Git's patch output read as typed changes: per file, its paths, its status and modes, whether
it is binary, and the lines of the new side that were added or changed.

:func:`parse_diff` is a pure function of the text ``git diff`` printed (tests feed it text); it
trusts nothing: a path git would quote is unquoted (C-style escapes, octal bytes), a path that
could leave the repository (absolute, ``..``, a ``.git`` part, a control character) is kept
with its ``unsafe`` reason, never opened, and a hunk is read by the counts its header gives,
so a content line that looks like a header (``+++ b/x``) is still content. Lines are split on
``\\n`` only: a CRLF file's ``\\r`` stays part of its lines and never shifts a number.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

ChangeStatus = Literal["added", "modified", "deleted", "renamed", "copied"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {
    "a": 7,
    "b": 8,
    "t": 9,
    "n": 10,
    "v": 11,
    "f": 12,
    "r": 13,
    '"': 34,
    "\\": 92,
}
#: Modes that are not a regular file's content: a symbolic link, a submodule.
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"


class FileChange(BaseModel):
    """One file of a diff, as git described it."""

    path: str = Field(description="The path on the new side (the old one for a deletion)")
    old_path: str | None = Field(None, description="The path before a rename or copy")
    status: ChangeStatus = "modified"
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    lines: list[int] = Field(
        default_factory=list, description="New-side lines added or changed (1-based, in order)"
    )
    unsafe: str | None = Field(None, description="Why a path cannot be used (None: safe)")

    @property
    def mode_changed(self) -> bool:
        """The mode changed (``old mode``/``new mode``), e.g. a script made executable."""
        return bool(self.old_mode and self.new_mode and self.old_mode != self.new_mode)


def unquote(text: str) -> str:
    """A path as git printed it: ``"a\\tb\\303\\251"`` unquoted (C-style escapes, octal bytes
    decoded as UTF-8); an unquoted path is returned as is."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 == len(body):
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:  # an escape git never writes: kept literally
            out += b"\\"
            i += 1
    return out.decode("utf-8", "replace")


def path_problem(path: str) -> str | None:
    """Why `path` cannot be a file of the repository (None: it can)."""
    if not path:
        return "an empty path"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return "an absolute path"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "a control character in the path"
    parts = re.split(r"[\\/]", path)
    if any(p == ".." for p in parts):
        return "a path that leaves the repository (..)"
    if any(p.lower() == ".git" for p in parts):
        return "a path inside .git"
    if any(p in ("", ".") for p in parts):
        return "a path with an empty or '.' part"
    return None


def _side(text: str, prefix: str) -> str | None:
    """The path of a ``--- a/x`` or ``+++ b/x`` line (None: ``/dev/null``)."""
    # git ends the name with a tab when it holds a space (for GNU patch); a tab inside a
    # name is always quoted.
    value = unquote(text.removesuffix("\t"))
    if value == "/dev/null":
        return None
    return value[len(prefix) :] if value.startswith(prefix) else value


def _git_line_paths(rest: str) -> tuple[str, str] | None:
    """The two paths of ``diff --git a/X b/Y`` when they can be told apart: quoted ones, or the
    same path twice (a path with spaces, not renamed); else None (the later lines say)."""
    if rest.startswith('"'):
        m = re.match(r'^("(?:[^"\\]|\\.)*")\s+(.*)$', rest)
        if m:
            return _strip(unquote(m[1]), "a/"), _strip(unquote(m[2]), "b/")
        return None
    if rest.endswith('"'):
        m = re.match(r'^(\S+)\s+("(?:[^"\\]|\\.)*")$', rest)
        if m:
            return _strip(m[1], "a/"), _strip(unquote(m[2]), "b/")
        return None
    half = (len(rest) - 5) // 2
    if len(rest) >= 7 and (len(rest) - 5) % 2 == 0:
        same = rest[2 : 2 + half]
        if rest == f"a/{same} b/{same}":
            return same, same
    return None


def _strip(path: str, prefix: str) -> str:
    return path[len(prefix) :] if path.startswith(prefix) else path


class _Reader:
    """The patch's lines, one file section after another."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.i = 0

    def _hunk(self, change: FileChange, header: re.Match[str]) -> None:
        old_left = int(header[2]) if header[2] is not None else 1
        new_left = int(header[4]) if header[4] is not None else 1
        number = int(header[3])
        while (old_left > 0 or new_left > 0) and self.i < len(self.lines):
            line = self.lines[self.i]
            tag = line[:1]
            if tag == "+" and new_left > 0:
                change.lines.append(number)
                number, new_left = number + 1, new_left - 1
            elif tag == "-" and old_left > 0:
                old_left -= 1
            elif tag == " " and old_left > 0 and new_left > 0:
                number, old_left, new_left = number + 1, old_left - 1, new_left - 1
            elif tag == "\\":
                pass  # "\ No newline at end of file"
            else:
                return  # a truncated hunk: what was read stands
            self.i += 1

    def section(self) -> FileChange | None:
        """The next file's change, or None at the end."""
        while self.i < len(self.lines) and not self.lines[self.i].startswith("diff --git "):
            self.i += 1
        if self.i >= len(self.lines):
            return None
        head = self.lines[self.i].rstrip("\r")
        self.i += 1
        paths = _git_line_paths(head[len("diff --git ") :])
        change = FileChange(path=paths[1] if paths else "")
        old = paths[0] if paths else None
        hunks = False
        while self.i < len(self.lines) and not self.lines[self.i].startswith("diff --git "):
            line = self.lines[self.i].rstrip("\r")
            self.i += 1
            if m := _HUNK.match(line):
                hunks = True
                self._hunk(change, m)
            elif not hunks:  # after the first hunk, a stray line is no header of ours
                old = self._header(change, line, old)
        _settle(change, old)
        return change

    def _header(self, change: FileChange, line: str, old: str | None) -> str | None:
        """Read one extended header line into `change`; returns the old path as known now."""
        word, _, value = line.partition(" ")
        if line.startswith("--- "):
            return _side(line[4:], "a/") or old
        if line.startswith("+++ "):
            new = _side(line[4:], "b/")
            if new is not None:
                change.path = new
            return old
        if line.startswith(("rename from ", "copy from ")):
            change.status = "renamed" if word == "rename" else "copied"
            return unquote(line.split(" ", 2)[2])
        if line.startswith(("rename to ", "copy to ")):
            change.path = unquote(line.split(" ", 2)[2])
        elif line.startswith("new file mode "):
            change.status, change.new_mode = "added", line.rsplit(" ", 1)[1]
        elif line.startswith("deleted file mode "):
            change.status, change.old_mode = "deleted", line.rsplit(" ", 1)[1]
        elif word == "old" and value.startswith("mode "):
            change.old_mode = value[5:]
        elif word == "new" and value.startswith("mode "):
            change.new_mode = value[5:]
        elif line.startswith("index "):
            mode = line.split(" ")[2:3]
            change.new_mode = change.new_mode or (mode[0] if mode else None)
        elif line.startswith(("Binary files ", "GIT binary patch")):
            change.binary = True
        return old


def _settle(change: FileChange, old: str | None) -> None:
    """The old path kept only where it differs; a deletion named by its old path; the paths
    checked."""
    if change.status == "deleted" and old:
        change.path = old
        old = None
    if old and old != change.path:
        change.old_path = old
    if change.status in ("renamed", "copied") and not change.old_path:
        change.status = "modified"
    change.unsafe = path_problem(change.path) or (
        path_problem(change.old_path) if change.old_path else None
    )


def parse_diff(text: str) -> list[FileChange]:
    """Every file of a ``git diff`` patch (any ``-U``; ``-M`` renames; binary files without
    ``--binary``), in the order git printed them.

    Args:
        text: the patch as git printed it (decoded; undecodable bytes replaced).
    """
    reader, out = _Reader(text), []
    while (change := reader.section()) is not None:
        out.append(change)
    return out
