"""What the JavaScript/TypeScript parsers tell about a source: the syntax check of a patched
file (``node --check`` for ``.cjs``/``.mjs``, whose module system is certain; the TypeScript
compiler's parser for the rest, which reads ES modules, JSX and types alike), the lines inside
function bodies (evidence), and the token-level mutations of covered lines (``autopilot eval``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tree_sitter import Tree

from tasks.core.resources import resource_path
from tasks.toolchains.mutants import SWAPS, Mutation, bump
from tasks.toolchains.node.layout import is_code
from tasks.toolchains.node.patches import TSCHECK
from tasks.toolchains.node.rubric_tree import FUNCTION_NODES, dialect_for, parser, text_of, walk

#: Checked by ``node --check`` (their module system does not depend on package.json).
NODE_CHECKED = (".cjs", ".mjs")
#: Strict (in)equality, JavaScript's usual comparison, besides the shared swaps.
_SWAPS = {**SWAPS, "===": "!==", "!==": "==="}
_BODIES = FUNCTION_NODES | {"method_definition", "function_declaration", "generator_function"}


def tscheck_script() -> Path:
    """The TypeScript parser check shipped with the stack."""
    return resource_path(f"tasks/toolchains/node/resources/{TSCHECK}")


def syntax_check(path: str, node: str, typescript: Path) -> list[str] | None:
    """The command that checks the syntax of `path` with `node` and the TypeScript package at
    `typescript`, or None when it is no JavaScript/TypeScript file."""
    if not is_code(path):
        return None
    if path.endswith(NODE_CHECKED):
        return [node, "--check", path]
    return [node, str(tscheck_script()), f"--typescript={typescript}", path]


def _tree(path: str, text: str) -> Tree:
    return parser(dialect_for(path)).parse(text.encode("utf-8", errors="replace"))


def body_lines(path: str, text: str) -> set[int]:
    """Line numbers strictly inside function bodies (a one-line function: its line)."""
    lines: set[int] = set()
    for node in walk(_tree(path, text).root_node):
        if node.type not in _BODIES:
            continue
        body = node.child_by_field_name("body")
        if body is None:
            continue
        start, end = body.start_point.row + 1, body.end_point.row + 1
        if body.type != "statement_block":
            lines.update(range(start, end + 1))  # an arrow function's expression
        elif end > start + 1:
            lines.update(range(start + 1, end))
        else:
            lines.add(start)
    return lines


def mutations(path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
    """Mutations of covered lines: a binary operator flipped (``<``/``>=``, ``===``/``!==``,
    ``+``/``-``...) or an integer literal plus one."""
    ascii_lines = {n for n, line in enumerate(text.splitlines(), start=1) if line.isascii()}
    for node in walk(_tree(path, text).root_node):
        row, col = node.start_point.row + 1, node.start_point.column
        # Columns are bytes in the tree, characters in a mutation: ASCII lines only.
        if row not in lines or row not in ascii_lines or node.has_error:
            continue
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            token = text_of(op)
            if op is not None and token in _SWAPS and op.start_point.row + 1 == row:
                line = op.start_point.row + 1
                after = _SWAPS[token]
                yield Mutation(
                    path=path, line=line, col=op.start_point.column, before=token, after=after
                )
        elif node.type == "number" and text_of(node).isdigit():
            token = text_of(node)
            yield Mutation(path=path, line=row, col=col, before=token, after=bump(token))


def syntax_ok(text: str) -> bool:
    """Whether the TypeScript grammar (a superset of JavaScript's) parses `text` cleanly."""
    return not _tree("mutant.ts", text).root_node.has_error
