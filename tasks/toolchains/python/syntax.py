"""What Python's parser tells about a source: the lines inside function bodies (evidence), the
syntax check of a patched file, and the mutations of covered lines that change its AST."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator

from tasks.toolchains.mutants import SWAPS, Mutation, apply, bump
from tasks.toolchains.python.parse import parse

#: ``ast.parse``, not ``py_compile``: nothing is written into the worktree.
_PARSE = "import ast,sys; ast.parse(open(sys.argv[1],'rb').read(), sys.argv[1])"


def syntax_check(path: str) -> list[str] | None:
    """Python's parser on a ``*.py`` file (run by Autopilot's interpreter), else None."""
    return [sys.executable, "-c", _PARSE, path] if path.endswith(".py") else None


def body_lines(text: str) -> set[int]:
    """Line numbers of the statements inside function bodies (at any depth)."""
    try:
        tree = parse(text)
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


def mutations(path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
    """Mutations of covered Python lines whose result parses to a different AST."""
    try:
        original = ast.dump(parse(text))
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return
    for tok in tokens:
        row, col = tok.start
        if row not in lines or tok.start[0] != tok.end[0]:
            continue
        if tok.type == tokenize.OP and tok.string in SWAPS:
            after = SWAPS[tok.string]
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            after = bump(tok.string)
        else:
            continue
        mutation = Mutation(path=path, line=row, col=col, before=tok.string, after=after)
        try:
            if ast.dump(parse(apply(text, mutation))) == original:
                continue
        except SyntaxError:
            continue
        yield mutation


_NO_COVER = re.compile(r"#\s*pragma:\s*no\s*cover", re.IGNORECASE)


def no_cover_lines(text: str) -> set[int]:
    """Lines marked ``# pragma: no cover``, with the block a marked ``...:`` line opens (as
    coverage.py's default exclusion reads them)."""
    lines = text.splitlines()
    marked: set[int] = set()
    n = 0
    while n < len(lines):
        line = lines[n]
        if not _NO_COVER.search(line):
            n += 1
            continue
        marked.add(n + 1)
        indent = len(line) - len(line.lstrip())
        n += 1
        if not line.split("#", 1)[0].rstrip().endswith(":"):
            continue
        while n < len(lines) and (
            not lines[n].strip() or len(lines[n]) - len(lines[n].lstrip()) > indent
        ):
            marked.add(n + 1)
            n += 1
    return marked
