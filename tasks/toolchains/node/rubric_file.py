"""File-level rules of the Jest static rubric: the module under test mocked away
(``mock-under-test``), and ``.only``/``.skip`` left in (``focused-test``, ``skipped-test``)."""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath

from tree_sitter import Node

from tasks.core.types import Finding
from tasks.toolchains.node.rubric_tree import arguments, callee, line_of, text_of, walk

TEST_FUNCTIONS = frozenset({"it", "test", "fit", "xit", "xtest", "specify"})
SUITE_FUNCTIONS = frozenset({"describe", "fdescribe", "xdescribe", "suite"})
FOCUSED = frozenset({"fit", "fdescribe"})
SKIPPED = frozenset({"xit", "xtest", "xdescribe"})
MOCKS = frozenset({"mock", "doMock", "unstable_mockModule"})


def _without_ext(path: str) -> str:
    base = path.rsplit(".", 1)[0] if "." in PurePosixPath(path).name else path
    return base.removesuffix("/index")


def _under_test(test_path: str, source: str | None) -> str | None:
    """The module the test file tests, without extension (repository-relative when the
    source is known, else the test's own name in its directory)."""
    if source:
        return _without_ext(source)
    name = PurePosixPath(test_path).name
    stem = name.split(".test.")[0].split(".spec.")[0]
    return stem.rsplit(".", 1)[0] if stem == name else stem


def mocked_module_findings(path: str, root: Node, source: str | None) -> list[Finding]:
    """``mock-under-test``: ``jest.mock``/``doMock``/``unstable_mockModule`` (or ``vi.*``) of
    the module the file tests (`source`, else the module named like the test file)."""
    target = _under_test(path, source)
    found: list[Finding] = []
    for node in walk(root):
        if node.type != "call_expression":
            continue
        chain = callee(node)
        if len(chain) != 2 or chain[0] not in ("jest", "vi") or chain[1] not in MOCKS:
            continue
        args = arguments(node)
        if not args or args[0].type != "string":
            continue
        spec = text_of(args[0]).strip("'\"`")
        if not spec.startswith("."):
            continue
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
        hit = (
            _without_ext(resolved) == target
            if source
            else PurePosixPath(_without_ext(resolved)).name == target
        )
        if hit:
            found.append(
                Finding(
                    path=path,
                    line=line_of(node),
                    rule="mock-under-test",
                    message=f"jest.{chain[1]}('{spec}') replaces the module under test: "
                    "the test then checks the mock, not the code",
                )
            )
    return found


def focus_findings(path: str, call: Node) -> list[Finding]:
    """``focused-test``/``skipped-test`` for one call (``it.only``, ``fit``, ``xit``...)."""
    parent = call.parent
    if (
        parent is not None
        and parent.type == "call_expression"
        and parent.child_by_field_name("function") == call
    ):
        return []  # it.skip.each(table): reported once, at the call that runs it
    chain = callee(call)
    if not chain or chain[0] not in TEST_FUNCTIONS | SUITE_FUNCTIONS:
        return []
    if chain[0] in FOCUSED or "only" in chain:
        return [
            Finding(
                path=path,
                line=line_of(call),
                rule="focused-test",
                message=f"{'.'.join(c for c in chain if c != '()')} left in: every other "
                "test of the file stops running",
            )
        ]
    if chain[0] in SKIPPED or "skip" in chain:
        return [
            Finding(
                path=path,
                line=line_of(call),
                rule="skipped-test",
                message=f"{'.'.join(c for c in chain if c != '()')}: the test never runs",
            )
        ]
    return []
