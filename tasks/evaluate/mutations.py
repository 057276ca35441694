"""Regressions for `autopilot eval`: small mutations of source lines the baseline suite covers.

A mutation flips a comparison (``<`` / ``>=``, ``==`` / ``!=``, ...), swaps ``+`` and ``-`` or
adds one to an integer constant, on one line the baseline executed. Python candidates come
from the tokenizer (so strings and comments are never touched) and must still parse to a
*different* AST; Ruby candidates are token-level edits on lines without string or regexp
literals and must pass ``ruby -c``. The choice is deterministic for a given seed, spread over
files round-robin, at most one mutation per line.
"""

from __future__ import annotations

import ast
import io
import logging
import random
import re
import subprocess
import tokenize
from collections.abc import Iterator, Mapping

from pydantic import BaseModel

from tasks.core.types import FileCoverage

log = logging.getLogger(__name__)

SWAPS = {
    "<": ">=",
    ">=": "<",
    ">": "<=",
    "<=": ">",
    "==": "!=",
    "!=": "==",
    "+": "-",
    "-": "+",
}
# Ruby: an operator between spaces (so `->`, `<<`, `=>`, `<=>`, `+=` are never matched) or a
# bare integer literal.
_RUBY_TOKEN = re.compile(r"(?<= )(<=|>=|==|!=|<|>|\+|-)(?= )|(?<![\w.:@$])\d+(?![\w.])")
_RUBY_SKIP = re.compile(r"""["'`/%]|^\s*#|\b(require|include|extend)\b|<<~?[A-Z]""")


class Mutation(BaseModel):
    """One token replaced on one line (1-based line, 0-based column)."""

    path: str
    line: int
    col: int
    before: str
    after: str

    def describe(self) -> str:
        """`path:line: before -> after`."""
        return f"{self.path}:{self.line}: {self.before} -> {self.after}"


def covered_lines(text: str, coverage: FileCoverage) -> set[int]:
    """Lines of `text` the baseline executed: code lines not listed as uncovered.

    A file the suite never touched (no covered line) has none.
    """
    if coverage.covered_lines == 0:
        return set()
    uncovered = set(coverage.uncovered_lines)
    return {
        n
        for n, line in enumerate(text.splitlines(), start=1)
        if n not in uncovered and line.strip() and not line.lstrip().startswith("#")
    }


def apply(text: str, mutation: Mutation) -> str:
    """`text` with `mutation` applied (the token must be where the mutation says)."""
    lines = text.splitlines(keepends=True)
    line = lines[mutation.line - 1]
    end = mutation.col + len(mutation.before)
    if line[mutation.col : end] != mutation.before:
        raise ValueError(f"{mutation.describe()}: token not found at column {mutation.col}")
    lines[mutation.line - 1] = line[: mutation.col] + mutation.after + line[end:]
    return "".join(lines)


def _bump(number: str) -> str:
    return str(int(number) + 1)


def python_candidates(path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
    """Mutations of covered Python lines whose result parses to a different AST."""
    try:
        original = ast.dump(ast.parse(text))
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
            after = _bump(tok.string)
        else:
            continue
        mutation = Mutation(path=path, line=row, col=col, before=tok.string, after=after)
        try:
            if ast.dump(ast.parse(apply(text, mutation))) == original:
                continue
        except SyntaxError:
            continue
        yield mutation


def ruby_candidates(path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
    """Token-level mutations of covered Ruby lines without string, regexp or heredoc literals
    (checked with ``ruby -c`` only when chosen: see :func:`choose`)."""
    for n, line in enumerate(text.splitlines(), start=1):
        if n not in lines or _RUBY_SKIP.search(line):
            continue
        code = line.split("#", 1)[0]
        for m in _RUBY_TOKEN.finditer(code):
            token = m.group(0)
            after = SWAPS[token] if token in SWAPS else _bump(token)
            yield Mutation(path=path, line=n, col=m.start(), before=token, after=after)


def ruby_syntax_ok(text: str) -> bool:
    """Whether ``ruby -c`` accepts `text` (read from stdin)."""
    try:
        done = subprocess.run(
            ["ruby", "-c"], input=text, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("ruby -c failed to run: %s", exc)
        return False
    return done.returncode == 0


def candidates(
    sources: Mapping[str, str], coverage: Mapping[str, FileCoverage]
) -> dict[str, list[Mutation]]:
    """Every candidate per source file (Python by suffix ``.py``, Ruby by ``.rb``)."""
    found: dict[str, list[Mutation]] = {}
    for path, text in sorted(sources.items()):
        cov = coverage.get(path)
        if cov is None:
            continue
        lines = covered_lines(text, cov)
        if path.endswith(".py"):
            found[path] = list(python_candidates(path, text, lines))
        elif path.endswith(".rb"):
            found[path] = list(ruby_candidates(path, text, lines))
    return {p: c for p, c in found.items() if c}


def choose(
    sources: Mapping[str, str],
    coverage: Mapping[str, FileCoverage],
    n: int,
    seed: int = 0,
) -> tuple[list[Mutation], dict[str, str]]:
    """Pick `n` mutations (fewer when there are not enough) and apply them.

    Files are visited round-robin (sorted by path), each file's candidates in a seeded random
    order; a line is mutated at most once; a Ruby file that no longer passes ``ruby -c`` drops
    that candidate.

    Returns:
        The chosen mutations and the mutated text of every file they touch.
    """
    rng = random.Random(seed)
    pools = candidates(sources, coverage)
    for pool in pools.values():
        rng.shuffle(pool)
    chosen: list[Mutation] = []
    texts: dict[str, str] = {}
    used: set[tuple[str, int]] = set()
    while len(chosen) < n and any(pools.values()):
        for path in sorted(pools):
            if len(chosen) >= n:
                break
            while pools[path]:
                m = pools[path].pop()
                if (path, m.line) in used:
                    continue
                mutated = apply(texts.get(path, sources[path]), m)
                if path.endswith(".rb") and not ruby_syntax_ok(mutated):
                    continue
                texts[path] = mutated
                used.add((path, m.line))
                chosen.append(m)
                break
    return chosen, texts
