"""Static rubric checks for Jest test files, on the tree-sitter JavaScript/TypeScript syntax
tree (never on raw text). Same contract as ``judge/static_ruby.py``: :func:`analyse` returns
the findings and the number of tests; the weights live with the judge (:data:`RULES` lists the
ones this module emits, for the judge's rule table).

Decisions worth knowing:
- Tests are ``it``/``test`` calls with a function (also ``fit``/``xit``/``xtest``, their
  ``.only``/``.skip``/``.concurrent``/``.failing`` forms and ``it.each(table)(name, fn)``);
  ``it.todo("...")`` is not a test.
- An expectation is ``expect(x).<matcher>(...)`` (through ``.not``, ``.resolves``,
  ``.rejects``), ``expect.<asymmetric>``-free; a call of anything named ``assert*`` (node's
  ``assert``) or ``expect*``; supertest's ``.expect(200)`` chained on a request; or a call to a
  function of the same file whose body holds one. ``expect.assertions(n)`` only counts them.
- ``toBeTruthy``/``toBeFalsy``/``toBeDefined`` (and ``.not.toBeUndefined``/``.not.toBeNull``)
  are vague only when they are all a test checks (rule ``vague-matcher``); so are snapshots
  (``snapshot-only``) and ``expect(fn).not.toThrow()`` (``not-raise-error``: "does not crash").
- ``jest.mock("./x")`` (``doMock``, ``unstable_mockModule``) of the module under test (the
  source given, else the module named like the test file) is ``mock-under-test``.
- ``.only``/``fit``/``fdescribe`` is ``focused-test`` (the rest of the suite silently stops
  running); ``.skip``/``xit``/``xdescribe``/``xtest`` is ``skipped-test``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from tasks.core.types import Finding
from tasks.toolchains.node.rubric_file import (
    TEST_FUNCTIONS,
    focus_findings,
    mocked_module_findings,
)
from tasks.toolchains.node.rubric_hooks import hook_findings
from tasks.toolchains.node.rubric_tree import (
    FUNCTION_NODES,
    arguments,
    callee,
    dialect_for,
    first_error_line,
    line_of,
    parser,
    text_of,
    walk,
)

__all__ = ["RULES", "RuleSpec", "analyse", "dialect_for", "first_error_line"]

VAGUE = frozenset({"toBeTruthy", "toBeFalsy", "toBeDefined"})
VAGUE_NEGATED = frozenset({"toBeUndefined", "toBeNull"})
SNAPSHOTS = frozenset(
    {
        "toMatchSnapshot",
        "toMatchInlineSnapshot",
        "toThrowErrorMatchingSnapshot",
        "toThrowErrorMatchingInlineSnapshot",
    }
)
THROWS = frozenset({"toThrow", "toThrowError"})
DOUBLES = frozenset({"fn", "spyOn", "mock", "doMock"})
#: More jest.fn/spyOn/mock calls than this in one test is over-mocking.
MAX_MOCKS_PER_TEST = 3


@dataclass(frozen=True)
class RuleSpec:
    """A rule this module emits, as the judge's table should hold it."""

    id: str
    forbidden: bool
    weight: float
    description: str


#: The rules for ``judge/static.py``'s table; the first four exist there already (for Ruby or
#: Python) and need "javascript" added to their languages; the last four are new.
RULES = (
    RuleSpec("syntax", True, 1.0, "the file does not parse, so it cannot load"),
    RuleSpec("no-assertion", True, 1.0, "a test with no expect/assert"),
    RuleSpec("not-raise-error", True, 1.0, "`expect(fn).not.toThrow()` is all a test checks"),
    RuleSpec("vague-matcher", False, 1.0, "toBeTruthy/toBeFalsy/toBeDefined is all it checks"),
    RuleSpec("over-mocking", False, 1.0, "more than 3 jest.fn/spyOn/mock in one test"),
    RuleSpec("raises-without-match", False, 0.25, "toThrow() without the error or message"),
    RuleSpec("sleep", False, 0.25, "a real timer (setTimeout) waited on in a test"),
    RuleSpec("snapshot-only", False, 1.0, "snapshots are all a test checks"),
    RuleSpec("mock-under-test", True, 1.0, "jest.mock() of the module the file tests"),
    RuleSpec("focused-test", True, 1.0, ".only/fit/fdescribe left in: the rest stops running"),
    RuleSpec("skipped-test", False, 1.0, ".skip/xit/xdescribe left in: the test never runs"),
)


def _test_body(call: Node) -> Node | None:
    """The function of a test call (`it("x", fn)`), or None when `call` is no test."""
    chain = callee(call)
    if not chain or chain[0] not in TEST_FUNCTIONS or "todo" in chain:
        return None
    functions = [a for a in arguments(call) if a.type in FUNCTION_NODES]
    return functions[0] if functions else None


@dataclass
class _Check:
    """One expectation found in a test: its kind and where it is."""

    kind: str  # precise | vague | snapshot | not-throw | bare-throw | count
    node: Node


def _expect_check(call: Node) -> _Check | None:
    """The matcher applied to an ``expect(...)`` call, walking up the member chain."""
    modifiers: list[str] = []
    node = call
    parent = node.parent
    while parent is not None and parent.type == "member_expression":
        name = text_of(parent.child_by_field_name("property"))
        grand = parent.parent
        if (
            grand is not None
            and grand.type == "call_expression"
            and grand.child_by_field_name("function") == parent
        ):
            return _classify(name, modifiers, grand)
        modifiers.append(name)
        node, parent = parent, grand
    return None  # `expect(x)` with no matcher checks nothing


def _classify(matcher: str, modifiers: list[str], call: Node) -> _Check:
    negated = "not" in modifiers
    if matcher in SNAPSHOTS:
        return _Check("snapshot", call)
    if matcher in THROWS:
        if negated:
            return _Check("not-throw", call)
        if not arguments(call):
            return _Check("bare-throw", call)
    if (matcher in VAGUE and not negated) or (negated and matcher in VAGUE_NEGATED):
        return _Check("vague", call)
    return _Check("precise", call)


def _helpers(root: Node) -> set[str]:
    """Functions of the file whose bodies hold an expectation (custom assertion helpers)."""
    names: set[str] = set()
    for node in walk(root):
        name_node = None
        body = None
        if node.type == "function_declaration":
            name_node, body = node.child_by_field_name("name"), node
        elif node.type == "variable_declarator":
            value = node.child_by_field_name("value")
            if value is not None and value.type in FUNCTION_NODES:
                name_node, body = node.child_by_field_name("name"), value
        if name_node is not None and body is not None and any(_checks_in(body, frozenset())):
            names.add(text_of(name_node))
    return names


def _checks_in(body: Node, helpers: frozenset[str] | set[str]) -> Iterator[_Check]:
    for node in walk(body):
        if node.type != "call_expression":
            continue
        chain = callee(node)
        if chain == ["expect"]:
            check = _expect_check(node)
            if check is not None:
                yield check
        elif chain[:1] == ["expect"] and chain[1:2] in (["assertions"], ["hasAssertions"]):
            yield _Check("count", node)
        elif chain and (_is_assert_helper(chain[0]) or chain[0] in helpers):
            yield _Check("precise", node)
        elif chain[-1:] == ["expect"] and len(chain) > 1:
            yield _Check("precise", node)  # supertest: request(app).get("/").expect(200)


def _is_assert_helper(name: str) -> bool:
    """``assert``, ``assertEqual``, ``expectValid``...: a custom or node assertion."""
    return name.startswith(("assert", "expect")) and name != "expect"


# size: DEBT to split (issue 14/18 wiring)
def _test_findings(path: str, call: Node, body: Node, helpers: set[str]) -> list[Finding]:
    line = line_of(call)
    checks = [c for c in _checks_in(body, helpers) if c.kind != "count"]
    found: list[Finding] = []
    if not checks:
        return [Finding(path=path, line=line, rule="no-assertion", message="a test with no expect")]
    kinds = {c.kind for c in checks}
    if kinds <= {"not-throw"}:
        found.append(
            Finding(
                path=path,
                line=line,
                rule="not-raise-error",
                message="expect(...).not.toThrow() is all this test checks: assert the result",
            )
        )
    elif kinds <= {"vague"}:
        found.append(
            Finding(
                path=path,
                line=line,
                rule="vague-matcher",
                message="toBeTruthy/toBeFalsy/toBeDefined is all this test checks: "
                "assert the exact value with toBe/toEqual",
            )
        )
    elif kinds <= {"snapshot"}:
        found.append(
            Finding(
                path=path,
                line=line,
                rule="snapshot-only",
                message="a snapshot is all this test checks: assert the values that matter",
            )
        )
    for check in checks:
        if check.kind == "bare-throw":
            found.append(
                Finding(
                    path=path,
                    line=line_of(check.node),
                    rule="raises-without-match",
                    message="toThrow() without the error class or message",
                )
            )
    mocks = [n for n in walk(body) if n.type == "call_expression" and _is_double(n)]
    if len(mocks) > MAX_MOCKS_PER_TEST:
        found.append(
            Finding(
                path=path,
                line=line,
                rule="over-mocking",
                message=f"{len(mocks)} jest.fn/spyOn/mock calls in one test",
            )
        )
    for node in walk(body):
        if node.type == "call_expression" and callee(node) in (["setTimeout"], ["sleep"]):
            found.append(
                Finding(
                    path=path,
                    line=line_of(node),
                    rule="sleep",
                    message="a real timer in a test: use jest.useFakeTimers()",
                )
            )
    return found


def _is_double(call: Node) -> bool:
    chain = callee(call)
    return len(chain) == 2 and chain[0] in ("jest", "vi") and chain[1] in DOUBLES


def analyse(path: str, text: str, source: str | None = None) -> tuple[list[Finding], int]:
    """Check one Jest test file.

    Args:
        path: the file's repository path, copied into every finding.
        text: the file's content.
        source: the repository path of the module it tests, when known (for
            ``mock-under-test``); else the module named like the test file.

    Returns:
        The findings (a single ``syntax`` finding when the file does not parse) and the number
        of tests.
    """
    tree = parser(dialect_for(path)).parse(text.encode("utf-8"))
    root = tree.root_node
    if root.has_error:
        message = "the file does not parse (it cannot load): fix the syntax first"
        return [Finding(path=path, line=first_error_line(root), rule="syntax", message=message)], 0
    helpers = _helpers(root)
    findings = mocked_module_findings(path, root, source)
    findings.extend(hook_findings(path, root, config=False))
    tests = 0
    for node in walk(root):
        if node.type != "call_expression":
            continue
        findings.extend(focus_findings(path, node))
        body = _test_body(node)
        if body is not None:
            tests += 1
            findings.extend(_test_findings(path, node, body, helpers))
    findings.sort(key=lambda f: (f.line, f.rule))
    return findings, tests
