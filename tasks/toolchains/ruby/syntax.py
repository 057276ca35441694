"""What the Ruby parser tells about a source: the lines inside method bodies (evidence), the
syntax check of a patched file, and the token-level mutations of covered lines."""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from tasks.toolchains.mutants import SWAPS, Mutation, bump

log = logging.getLogger(__name__)

#: Files whose syntax ``ruby -c`` checks (besides ``*.rb``).
RUBY_FILES = ("Gemfile", "Rakefile")
# Ruby: an operator between spaces (so `->`, `<<`, `=>`, `<=>`, `+=` are never matched) or a
# bare integer literal.
_RUBY_TOKEN = re.compile(r"(?<= )(<=|>=|==|!=|<|>|\+|-)(?= )|(?<![\w.:@$])\d+(?![\w.])")
_RUBY_SKIP = re.compile(r"""["'`/%]|^\s*#|\b(require|include|extend)\b|<<~?[A-Z]""")


def is_ruby(path: str) -> bool:
    """A Ruby file by its name: ``*.rb``, ``*.rake``, a Gemfile or Rakefile."""
    return path.endswith((".rb", ".rake")) or path.rsplit("/", 1)[-1] in RUBY_FILES


def syntax_check(path: str) -> list[str] | None:
    """``ruby -c <path>`` for a Ruby file, else None."""
    return ["ruby", "-c", path] if is_ruby(path) else None


@lru_cache(maxsize=1)
def _ruby_parser() -> Any:
    import tree_sitter_ruby
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_ruby.language()))


def body_lines(text: str) -> set[int]:
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


def mutations(path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
    """Token-level mutations of covered Ruby lines without string, regexp or heredoc literals
    (checked with ``ruby -c`` only when chosen: see :func:`choose`)."""
    for n, line in enumerate(text.splitlines(), start=1):
        if n not in lines or _RUBY_SKIP.search(line):
            continue
        code = line.split("#", 1)[0]
        for m in _RUBY_TOKEN.finditer(code):
            token = m.group(0)
            after = SWAPS[token] if token in SWAPS else bump(token)
            yield Mutation(path=path, line=n, col=m.start(), before=token, after=after)


def syntax_ok(text: str) -> bool:
    """Whether ``ruby -c`` accepts `text` (read from stdin)."""
    try:
        done = subprocess.run(
            ["ruby", "-c"], input=text, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("ruby -c failed to run: %s", exc)
        return False
    return done.returncode == 0


def no_cover_lines(text: str) -> set[int]:
    """Lines between a pair of ``# :nocov:`` comments, the markers included (SimpleCov's
    default nocov token); an unclosed block runs to the end of the file."""
    marked: set[int] = set()
    inside = False
    for n, line in enumerate(text.splitlines(), start=1):
        toggle = line.strip().startswith("#") and line.strip().lstrip("#").strip() == ":nocov:"
        if toggle or inside:
            marked.add(n)
        if toggle:
            inside = not inside
    return marked
