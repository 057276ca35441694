"""Which files a generator reply may write, and writing them into the target's own copy.

A reply may write, under the test tree and within its skill's ``writes`` globs:
- new test files and new support files (``spec/factories/<plural>.rb``, ``tests/conftest.py``);
- the target's own existing specs (to improve them);
- existing shared support files (factories, conftest.py): allowed, but every support file a
  reply writes or changes is checked by the static rubric, shown to the judge and proved by
  the ``support`` gate (:mod:`tasks.generate.support_gate`: left out when the tests do not
  need it, else it may change no other result).
Any other existing file (another source's spec, the helpers) is refused with a reason the model
can act on: the client re-asks with it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from tasks.core.errors import ReplyFormatError
from tasks.generate.skills import Skill
from tasks.generate.targets import Target
from tasks.model.replies import parse_files_reply
from tasks.toolchains.files import FileRules


def reply_parser(
    project: Path,
    target: Target,
    skill: Skill,
    rules: FileRules,
    replies: list[str],
    written: Collection[str] = (),
) -> Callable[[str], dict[str, str]]:
    """A parser for the model client: checks every path, keeps every raw reply in `replies`.

    `rules` are the toolchain's (the test roots a reply may write under, what a test file and
    shared support are); `written` holds the paths earlier rounds wrote (the model may rewrite
    its own files).

    Raises (from the parser):
        ReplyFormatError: a path outside the test tree or the skill's globs, an existing file
            that is neither the target's spec nor shared support, or no test file at all.
    """
    roots = tuple(f"{root}/" if root else "" for root in rules.write_roots())

    def parse(text: str) -> dict[str, str]:
        replies.append(text)
        files = parse_files_reply(text, roots)
        for path in files:
            if not rules.is_test_side(path):
                raise ReplyFormatError(
                    f"{path}: not a test or test support file; put the tests of "
                    f"{target.source} in {target.spec}"
                )
            if not skill.may_write(path):
                allowed = ", ".join(skill.meta.writes)
                raise ReplyFormatError(
                    f"{path}: the {skill.name} skill may only write {allowed}; "
                    f"put the tests of {target.source} in {target.spec}"
                )
            exists = (project / path).is_file() and path not in written
            if exists and path not in target.specs and not rules.is_support_file(path):
                raise ReplyFormatError(
                    f"{path}: an existing test file of another source; do not change it, "
                    f"write the tests of {target.source} in {target.spec}"
                )
        if not any(rules.is_test_file(p) for p in files):
            raise ReplyFormatError(
                f"no test file in the reply: write the tests of {target.source} "
                f"in {target.spec} (support files alone run nothing)"
            )
        return files

    return parse


def snapshot(project: Path, paths: list[str]) -> dict[str, str | None]:
    """The current content of `paths` in the project (None when absent)."""
    out: dict[str, str | None] = {}
    for rel in paths:
        p = project / rel
        out[rel] = p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None
    return out


def write_files(project: Path, files: dict[str, str]) -> None:
    """Write reply files into the project copy (paths were checked by the parser)."""
    root = project.resolve()
    for rel, text in files.items():
        dest = (root / rel).resolve()
        if not dest.is_relative_to(root):  # defence in depth: the parser already refused it
            raise ReplyFormatError(f"{rel}: leaves the repository")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")


def read_back(project: Path, paths: list[str]) -> dict[str, str]:
    """The files as they are now (after lint autocorrect)."""
    return {
        rel: (project / rel).read_text(encoding="utf-8", errors="replace")
        for rel in paths
        if (project / rel).is_file()
    }
