"""The syntax-tree side of the Jest static rubric: tree-sitter JavaScript/TypeScript/TSX
parsers (built lazily) and the small node helpers the rules share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from tree_sitter import Language, Node, Parser

#: Node types of a function written inline (a test's callback).
FUNCTION_NODES = frozenset({"arrow_function", "function_expression", "function"})
_PARSERS: dict[str, Parser] = {}


def parser(dialect: str) -> Parser:
    """The parser of a dialect (see :func:`dialect_for`), built once, on first use."""
    if dialect not in _PARSERS:
        if dialect == "javascript":
            import tree_sitter_javascript

            language = Language(tree_sitter_javascript.language())
        else:
            import tree_sitter_typescript

            raw = (
                tree_sitter_typescript.language_tsx()
                if dialect == "tsx"
                else tree_sitter_typescript.language_typescript()
            )
            language = Language(raw)
        _PARSERS[dialect] = Parser(language)
    return _PARSERS[dialect]


def dialect_for(path: str) -> str:
    """The grammar of a file: ``typescript``, ``tsx`` or ``javascript`` (JSX included)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in (".ts", ".mts", ".cts"):
        return "typescript"
    if suffix == ".tsx":
        return "tsx"
    return "javascript"


def text_of(node: Node | None) -> str:
    """A node's source text ("" for None)."""
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def line_of(node: Node) -> int:
    """A node's 1-based start line."""
    return node.start_point.row + 1


def walk(node: Node) -> Iterator[Node]:
    """Every node under `node` (itself included), in source order, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def callee(call: Node) -> list[str]:
    """A call's function as a name chain: ``it.only`` -> [it, only], ``it.each(t)`` called ->
    [it, each, ()], ``request(app).get`` -> [request, (), get]; [] when computed."""
    func = call.child_by_field_name("function")
    parts: list[str] = []
    while func is not None and func.type == "member_expression":
        parts.append(text_of(func.child_by_field_name("property")))
        func = func.child_by_field_name("object")
    if func is None:
        return []
    if func.type == "identifier":
        base = [text_of(func)]
    elif func.type == "call_expression":
        inner = callee(func)
        if not inner:
            return []
        base = [*inner, "()"]
    else:
        return []
    return base + list(reversed(parts))


def arguments(call: Node) -> list[Node]:
    """A call's arguments (comments left out)."""
    args = call.child_by_field_name("arguments")
    return [] if args is None else [c for c in args.named_children if c.type != "comment"]


def first_error_line(root: Node) -> int:
    """The line of the first syntax error (ERROR or missing node) of a tree."""
    for node in walk(root):
        if node.type == "ERROR" or node.is_missing:
            return line_of(node)
    return 1
