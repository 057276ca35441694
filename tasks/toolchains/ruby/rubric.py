"""Static rubric checks for RSpec files, on the tree-sitter Ruby syntax tree (never on raw text).

The rule ids and their weights live in judge/static.py; this module only finds them.

Decisions worth knowing:
- `be_nil` and `be_empty` are NOT vague: they pin one exact value, like `eq(nil)` / `eq([])`.
- `be_a`/`be_an`/`be_kind_of`/`be_instance_of` are fine next to a precise expectation; they are
  flagged (rule `type-only`) only when an example has no precise expectation at all.
- `send`/`__send__` with a literal method name is treated as a private call: a public method is
  called directly, so a literal `send` only exists to get around visibility. A computed name
  (`send(attr)`, typical of shared examples over public attributes) is not flagged.
- Expectations are `expect`, `is_expected`, `are_expected`, `should`, `should_not`, any
  helper named `expect_*` or `assert_*` (a project's custom assertion helpers), and any method
  defined in the same file whose body holds an expectation.
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter_ruby
from tree_sitter import Language, Node, Parser

from tasks.core.types import Finding
from tasks.toolchains.ruby.rubric_hooks import hook_findings

EXAMPLE_METHODS = frozenset(
    {"it", "specify", "example", "its", "scenario", "fit", "fspecify", "fexample", "focus"}
)
EXPECTATIONS = frozenset({"expect", "is_expected", "are_expected", "should", "should_not"})
EXPECTATION_PREFIXES = ("expect_", "assert_")
RUNNERS = frozenset({"to", "not_to", "to_not", "should", "should_not"})
NEGATIVE_RUNNERS = frozenset({"not_to", "to_not", "should_not"})
VAGUE_MATCHERS = frozenset(
    {"be_truthy", "be_falsey", "be_falsy", "be_present", "be_blank", "be_between"}
)
TYPE_MATCHERS = frozenset(
    {"be_a", "be_an", "be_kind_of", "be_a_kind_of", "be_instance_of", "be_an_instance_of"}
)
RAISE_MATCHERS = frozenset({"raise_error", "raise_exception"})
ANY_INSTANCE = frozenset({"allow_any_instance_of", "expect_any_instance_of", "any_instance"})
MOCK_NAMES = frozenset(
    {
        "double",
        "instance_double",
        "class_double",
        "object_double",
        "spy",
        "instance_spy",
        "class_spy",
        "object_spy",
        "receive",
        "receive_messages",
        "receive_message_chain",
        "stub",
    }
)
SETUP_METHODS = frozenset({"before", "prepend_before", "append_before", "let", "let!", "subject"})
PRIVATE_SENDS = frozenset({"send", "__send__"})
LITERAL_NAMES = frozenset({"simple_symbol", "string", "delimited_symbol"})
#: More stubs and doubles than this in one example (setup included) is over-mocking.
MAX_MOCKS_PER_EXAMPLE = 3

_PARSER: Parser | None = None


def _parser() -> Parser:
    # Built lazily: nothing heavy happens at import time.
    global _PARSER
    if _PARSER is None:
        _PARSER = Parser(Language(tree_sitter_ruby.language()))
    return _PARSER


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _method(node: Node) -> str:
    """The method name of a call node, or an identifier used as an argument-less call."""
    if node.type == "call":
        return _text(node.child_by_field_name("method"))
    if node.type == "identifier":
        return _text(node)
    return ""


def _called_names(node: Node) -> Iterator[tuple[str, Node]]:
    """Every method name called under node: calls, plus bare identifiers (`is_expected`)."""
    for n in _walk(node):
        if n.type == "call":
            yield _method(n), n
        elif n.type == "identifier":
            parent = n.parent
            if parent is not None and parent.type == "call":
                method = parent.child_by_field_name("method")
                if method is not None and method == n:
                    continue  # already yielded as the call's own name
            yield _text(n), n


def _is_example(node: Node) -> bool:
    return (
        node.type == "call"
        and node.child_by_field_name("receiver") is None
        and _method(node) in EXAMPLE_METHODS
        and node.child_by_field_name("block") is not None
    )


def _args(node: Node) -> list[Node]:
    args = node.child_by_field_name("arguments")
    return list(args.named_children) if args is not None else []


def _matcher_roots(node: Node) -> Iterator[Node]:
    """The matchers in `to(...)`'s argument, looking through compound `.and`/`.or`/`&`/`|`."""
    # Iterative: a hostile spec can chain thousands of `.and`.
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "call" and _method(current) in ("and", "or"):
            receiver = current.child_by_field_name("receiver")
            parts = ([receiver] if receiver is not None else []) + _args(current)
            stack.extend(reversed(parts))
        elif current.type == "binary" and _text(current.child_by_field_name("operator")) in (
            "&",
            "|",
        ):
            sides = [current.child_by_field_name(s) for s in ("left", "right")]
            stack.extend(reversed([s for s in sides if s is not None]))
        elif current.type == "parenthesized_statements" and current.named_children:
            stack.append(current.named_children[-1])
        else:
            yield current


def _expectations(root: Node) -> Iterator[tuple[str, Node]]:
    """(runner, matcher) for every `x.to(m)`, `x.not_to m`, `should m` under root."""
    for n in _walk(root):
        if n.type == "call" and _method(n) in RUNNERS:
            args = _args(n)
            if args:
                for matcher in _matcher_roots(args[0]):
                    yield _method(n), matcher


def _classify(runner: str, matcher: Node) -> str:
    """One of: vague, type, not-raise, raise-bare, precise."""
    name = _method(matcher)
    if name in VAGUE_MATCHERS:
        return "vague"
    if name == "include":
        args = _args(matcher)
        if args and all(a.type == "simple_symbol" for a in args):
            return "vague"
    if name in TYPE_MATCHERS:
        return "type"
    if name in RAISE_MATCHERS:
        if runner in NEGATIVE_RUNNERS:
            return "not-raise"
        args = _args(matcher)
        has_block = matcher.type == "call" and matcher.child_by_field_name("block") is not None
        class_only = len(args) == 1 and args[0].type in ("constant", "scope_resolution")
        if (not args or class_only) and not has_block:
            return "raise-bare"
    return "precise"


def _matcher_findings(path: str, root: Node) -> list[Finding]:
    findings: list[Finding] = []
    for runner, matcher in _expectations(root):
        kind = _classify(runner, matcher)
        name = _method(matcher) or _text(matcher)
        line = _line(matcher)
        if kind == "vague":
            msg = f"vague matcher `{_text(matcher)}`: assert the exact value with eq(...)"
            findings.append(Finding(path=path, line=line, rule="vague-matcher", message=msg))
        elif kind == "not-raise":
            msg = f"`{runner} {name}` only proves the code does not crash: assert its result"
            findings.append(Finding(path=path, line=line, rule="not-raise-error", message=msg))
        elif kind == "raise-bare":
            msg = f"`{_text(matcher)}` without the message: give the error class and message"
            findings.append(Finding(path=path, line=line, rule="raises-without-match", message=msg))
    return findings


def _setup_blocks(example: Node) -> Iterator[Node]:
    """before/let/subject blocks of every group enclosing the example: they run for it."""
    node = example.parent
    while node is not None:
        if node.type in ("body_statement", "block_body", "program"):
            for sibling in node.named_children:
                if (
                    sibling.type == "call"
                    and sibling.child_by_field_name("receiver") is None
                    and _method(sibling) in SETUP_METHODS
                ):
                    yield sibling
        node = node.parent


def _is_expectation(name: str, helpers: frozenset[str]) -> bool:
    return name in EXPECTATIONS or name.startswith(EXPECTATION_PREFIXES) or name in helpers


def asserting_helpers(root: Node) -> frozenset[str]:
    """Names of methods defined in the file (`def check_json`) that contain an expectation.

    Calling one of them from an example counts as an expectation; helpers calling helpers are
    followed to a fixpoint.
    """
    bodies = {
        _text(n.child_by_field_name("name")): n
        for n in _walk(root)
        if n.type == "method" and n.child_by_field_name("name") is not None
    }
    helpers: frozenset[str] = frozenset()
    while True:
        found = frozenset(
            name
            for name, body in bodies.items()
            if any(_is_expectation(called, helpers) for called, _ in _called_names(body))
        )
        if found == helpers:
            return helpers
        helpers = found


def _example_findings(path: str, example: Node, helpers: frozenset[str]) -> list[Finding]:
    findings: list[Finding] = []
    block = example.child_by_field_name("block")
    assert block is not None  # guaranteed by _is_example
    line = _line(example)
    names = [name for name, _ in _called_names(block)]
    if not any(_is_expectation(n, helpers) for n in names):
        msg = f"example `{_describe(example)}` has no expectation"
        findings.append(Finding(path=path, line=line, rule="no-assertion", message=msg))
    kinds = [(_classify(r, m), m) for r, m in _expectations(block)]
    type_nodes = [m for k, m in kinds if k == "type"]
    if type_nodes and not any(k == "precise" for k, _ in kinds):
        msg = f"`{_text(type_nodes[0])}` is the only kind of check: assert the value itself"
        findings.append(
            Finding(path=path, line=_line(type_nodes[0]), rule="type-only", message=msg)
        )
    mocks = sum(1 for n in names if n in MOCK_NAMES)
    for setup in _setup_blocks(example):
        mocks += sum(1 for n, _ in _called_names(setup) if n in MOCK_NAMES)
    if mocks > MAX_MOCKS_PER_EXAMPLE:
        msg = (
            f"example `{_describe(example)}` uses {mocks} stubs/doubles "
            f"(more than {MAX_MOCKS_PER_EXAMPLE}): it tests the mocks, not the code"
        )
        findings.append(Finding(path=path, line=line, rule="over-mocking", message=msg))
    return findings


def _describe(example: Node) -> str:
    args = _args(example)
    if args and args[0].type == "string":
        return _text(args[0]).strip("'\"")[:60]
    return f"{_method(example)} at line {_line(example)}"


def _inside_method_def(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in ("method", "singleton_method"):
            return True
        parent = parent.parent
    return False


def _node_findings(path: str, node: Node) -> list[Finding]:
    """Rules that look at one node, wherever it is in the file."""
    line = _line(node)
    if node.type in ("assignment", "operator_assignment"):
        left = node.child_by_field_name("left")
        if left is not None and left.type == "instance_variable" and not _inside_method_def(node):
            msg = f"instance variable `{_text(left)}` set in a spec: use let"
            return [Finding(path=path, line=line, rule="instance-variable", message=msg)]
        return []
    if node.type != "call":
        return []
    name = _method(node)
    receiver = node.child_by_field_name("receiver")
    if name in ANY_INSTANCE:
        msg = f"`{name}` stubs every instance: inject a double or use the real object"
        return [Finding(path=path, line=line, rule="any-instance-mock", message=msg)]
    if name in PRIVATE_SENDS:
        args = _args(node)
        if args and args[0].type in LITERAL_NAMES:
            msg = f"`{_text(node)[:60]}` calls a method by name: test the public interface"
            return [Finding(path=path, line=line, rule="private-call", message=msg)]
    if name == "instance_variable_get":
        msg = f"`{_text(node)[:60]}` reads private state: test the public interface"
        return [Finding(path=path, line=line, rule="private-call", message=msg)]
    if name == "sleep" and (receiver is None or _text(receiver) == "Kernel"):
        msg = "`sleep` in a spec: wait on a condition or freeze time instead"
        return [Finding(path=path, line=line, rule="sleep", message=msg)]
    return []


def first_error_line(root: Node) -> int:
    """The line of the first ERROR or MISSING node (1 when none is found)."""
    for n in _walk(root):
        if n.is_error or n.is_missing:
            return _line(n)
    return 1


def analyse(path: str, text: str) -> tuple[list[Finding], int]:
    """Check one RSpec file.

    Args:
        path: The file's repository path, copied into every finding.
        text: The file's content.

    Returns:
        The findings (a single `syntax` finding when the file does not parse) and the number of
        examples (`it`/`specify`/`example`/`its` blocks).
    """
    tree = _parser().parse(text.encode("utf-8"))
    root = tree.root_node
    if root.has_error:
        line = first_error_line(root)
        msg = "the file does not parse as Ruby (it cannot load): fix the syntax first"
        return [Finding(path=path, line=line, rule="syntax", message=msg)], 0
    findings = _matcher_findings(path, root) + hook_findings(path, root, support=False)
    helpers = asserting_helpers(root)
    examples = 0
    for node in _walk(root):
        if _is_example(node):
            examples += 1
            findings.extend(_example_findings(path, node, helpers))
        findings.extend(_node_findings(path, node))
    findings.sort(key=lambda f: (f.line, f.rule))
    return findings, examples
