"""Which test files exercise which sources: mapping tests to code by what they execute.

The suite run records, per source line, the test files that ran it (coverage.py contexts for
pytest, per-spec-file SimpleCov deltas for RSpec). Loading a file runs its definitions (``def``
lines, class bodies, imports) whoever caused the load, so only lines inside function or method
bodies count: a test file "tests" a source when it ran at least one line of the source's
function bodies.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: source -> test file -> executed line numbers.
LineContexts = dict[str, dict[str, set[int]]]


def python_body_lines(text: str) -> set[int]:
    """Line numbers of the statements inside function bodies (at any depth)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            for stmt in body:
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.stmt | ast.expr) and hasattr(inner, "lineno"):
                        lines.add(inner.lineno)
    return lines


@lru_cache(maxsize=1)
def _ruby_parser() -> Any:
    import tree_sitter_ruby
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_ruby.language()))


def ruby_body_lines(text: str) -> set[int]:
    """Line numbers strictly inside method bodies (``def ... end``, blocks and lambdas in them)."""
    tree = _ruby_parser().parse(text.encode("utf-8", errors="replace"))
    lines: set[int] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("method", "singleton_method"):
            start, end = node.start_point[0] + 1, node.end_point[0] + 1
            # The def line runs at load time; a one-line method has no other line.
            if end > start:
                lines.update(range(start + 1, end))
            else:
                lines.add(start)
        stack.extend(node.children)
    return lines


def body_lines_for(path: str) -> Callable[[str], set[int]] | None:
    """The body-line finder for a source file's language, or None."""
    if path.endswith(".py"):
        return python_body_lines
    if path.endswith(".rb"):
        return ruby_body_lines
    return None


def exercised_by(contexts: LineContexts, repo: Path) -> dict[str, list[str]]:
    """source -> the test files that ran at least one line of its function bodies.

    Args:
        contexts: per source, the lines each test file executed.
        repo: the project directory the sources are read from.
    """
    out: dict[str, list[str]] = {}
    for source, by_test in contexts.items():
        finder = body_lines_for(source)
        if finder is None or not by_test:
            continue
        try:
            text = (repo / source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        body = finder(text)
        tests = sorted(test for test, lines in by_test.items() if lines & body)
        if tests:
            out[source] = tests
    return out
