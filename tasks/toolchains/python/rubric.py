"""Static rubric checks for pytest files, on Python's `ast` (never on raw text).

The rule ids and their weights live in judge/static.py; this module only finds them.

Decisions worth knowing:
- Tests are what pytest collects by default: `test*` functions at module level and `test*`
  methods of `Test*` classes or of `unittest.TestCase` subclasses.
- An assertion is an `assert` statement, `pytest.raises`/`pytest.warns`, a call to anything
  named `assert*` (`mock.assert_called_once_with`, `self.assertEqual`), or a call to a helper
  defined in the same file whose body asserts.
- `assert x is None` is precise (one exact value); `assert x is not None` is not, and is flagged
  only when a test has nothing more precise (rule `not-none-only`). `isinstance` likewise
  (`type-only`). A bare `assert x` / `assert not x` / `assert f(x)` is always flagged.
- `pytest.raises(E)` without `match=` is flagged unless the test binds it (`as exc`) and then
  asserts on that name, which checks the message another way.
- Private access is `obj._name` (not dunder, not `self`/`cls`, not the namedtuple API) and
  `from mod import _name`, anywhere in the file, fixtures included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from tasks.core.types import Finding
from tasks.toolchains.python.parse import parse
from tasks.toolchains.python.rubric_hooks import hook_findings

#: More mocks and patches than this in one test is over-mocking.
MAX_MOCKS_PER_TEST = 3
MOCK_FACTORIES = frozenset(
    {"Mock", "MagicMock", "AsyncMock", "NonCallableMock", "NonCallableMagicMock", "create_autospec"}
)
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
SELF_NAMES = frozenset({"self", "cls"})


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains, "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _callee(node: ast.AST) -> str:
    return _dotted(node.func) if isinstance(node, ast.Call) else ""


def _is_raises(call: ast.AST) -> bool:
    return _callee(call) in ("pytest.raises", "raises")


def _is_warns(call: ast.AST) -> bool:
    return _callee(call) in ("pytest.warns", "warns")


def _is_mock(call: ast.Call) -> bool:
    name = _callee(call)
    parts = name.split(".")
    if parts[-1] in MOCK_FACTORIES or name == "mocker.spy":
        return True
    # patch, mock.patch, unittest.mock.patch, patch.object, mocker.patch.dict, ...
    return "patch" in parts


def _assert_kind(test: ast.expr) -> str:
    """Classify an assert's expression: bare, not-none, type or precise."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return "not-none"
    if isinstance(test, ast.Call) and _callee(test) == "isinstance":
        return "type"
    if isinstance(test, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
        return "bare"
    return "precise"


@dataclass
class _TestFacts:
    """What one test function contains, gathered in one walk."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    asserts: list[tuple[str, ast.Assert]] = field(default_factory=list)
    raises: list[ast.Call] = field(default_factory=list)
    raises_bound: dict[str, ast.Call] = field(default_factory=dict)
    assert_calls: int = 0
    mocks: int = 0
    names_in_asserts: set[str] = field(default_factory=set)


def asserting_helpers(tree: ast.Module) -> frozenset[str]:
    """Names of non-test functions and methods in the file whose body asserts something.

    A test that delegates its checks to such a helper (`check_totals(result)`,
    `self.assert_valid(x)`) has assertions; helpers calling helpers are followed to a fixpoint.
    """
    defs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("test")
    ]
    helpers: frozenset[str] = frozenset()
    while True:
        found = frozenset(d.name for d in defs if _asserts_anything(d, helpers))
        if found == helpers:
            return helpers
        helpers = found


def _asserts_anything(fn: ast.FunctionDef | ast.AsyncFunctionDef, helpers: frozenset[str]) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, ast.Assert):
            return True
        if isinstance(n, ast.Call) and (
            _is_raises(n) or _is_warns(n) or _is_assert_call(n, helpers)
        ):
            return True
    return False


def _is_assert_call(call: ast.Call, helpers: frozenset[str]) -> bool:
    last = _callee(call).split(".")[-1]
    return last.startswith("assert") or last in helpers


def _gather(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, helpers: frozenset[str] = frozenset()
) -> _TestFacts:
    facts = _TestFacts(node=fn)
    for dec in fn.decorator_list:
        for n in ast.walk(dec):
            if isinstance(n, ast.Call) and _is_mock(n):
                facts.mocks += 1
    for stmt in fn.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assert):
                facts.asserts.append((_assert_kind(n.test), n))
                facts.names_in_asserts.update(
                    m.id for m in ast.walk(n.test) if isinstance(m, ast.Name)
                )
            elif isinstance(n, ast.With | ast.AsyncWith):
                for item in n.items:
                    var = item.optional_vars
                    if _is_raises(item.context_expr) and isinstance(var, ast.Name):
                        assert isinstance(item.context_expr, ast.Call)
                        facts.raises_bound[var.id] = item.context_expr
            elif isinstance(n, ast.Call):
                if _is_raises(n):
                    facts.raises.append(n)
                elif (
                    _is_warns(n)
                    or _callee(n).split(".")[-1].startswith("assert")
                    or _callee(n).split(".")[-1] in helpers
                ):
                    facts.assert_calls += 1
                elif _is_mock(n):
                    facts.mocks += 1
    return facts


def _test_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                yield node
        elif isinstance(node, ast.ClassDef):
            is_testcase = any(_dotted(b).split(".")[-1].endswith("TestCase") for b in node.bases)
            if node.name.startswith("Test") or is_testcase:
                for item in node.body:
                    if isinstance(
                        item, ast.FunctionDef | ast.AsyncFunctionDef
                    ) and item.name.startswith("test"):
                        yield item


def _test_findings(path: str, facts: _TestFacts) -> list[Finding]:
    fn = facts.node
    findings: list[Finding] = []
    kinds = [k for k, _ in facts.asserts]
    if not facts.asserts and not facts.raises and not facts.assert_calls:
        msg = f"test `{fn.name}` has no assertion"
        findings.append(Finding(path=path, line=fn.lineno, rule="no-assertion", message=msg))
    for kind, node in facts.asserts:
        if kind == "bare":
            msg = f"bare `assert {ast.unparse(node.test)[:60]}`: compare with the exact value"
            findings.append(Finding(path=path, line=node.lineno, rule="bare-assert", message=msg))
    precise = "precise" in kinds or bool(facts.raises) or facts.assert_calls > 0
    if not precise:
        for kind, rule, why in (
            ("not-none", "not-none-only", "`is not None` is the only check"),
            ("type", "type-only", "`isinstance` is the only kind of check"),
        ):
            first = next((n for k, n in facts.asserts if k == kind), None)
            if first is not None:
                msg = f"test `{fn.name}`: {why}: assert the value itself"
                findings.append(Finding(path=path, line=first.lineno, rule=rule, message=msg))
    checked_by_name = {
        id(call) for name, call in facts.raises_bound.items() if name in facts.names_in_asserts
    }
    for call in facts.raises:
        has_match = any(kw.arg == "match" for kw in call.keywords)
        if not has_match and id(call) not in checked_by_name:
            msg = f"`{ast.unparse(call)[:60]}` without match=: check the error message too"
            findings.append(
                Finding(path=path, line=call.lineno, rule="raises-without-match", message=msg)
            )
    if facts.mocks > MAX_MOCKS_PER_TEST:
        msg = (
            f"test `{fn.name}` uses {facts.mocks} mocks/patches "
            f"(more than {MAX_MOCKS_PER_TEST}): it tests the mocks, not the code"
        )
        findings.append(Finding(path=path, line=fn.lineno, rule="over-mocking", message=msg))
    return findings


def _file_findings(path: str, tree: ast.Module) -> list[Finding]:
    """Rules that look at single nodes anywhere in the file."""
    findings: list[Finding] = []
    sleep_names = {"time.sleep"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            sleep_names.update(a.asname or a.name for a in node.names if a.name == "sleep")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _is_private(alias.name):
                    msg = f"imports private `{alias.name}` from {node.module}: test the public API"
                    findings.append(
                        Finding(path=path, line=node.lineno, rule="private-call", message=msg)
                    )
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = _dotted(node.value)
            if owner not in SELF_NAMES and node.attr not in NAMEDTUPLE_API:
                msg = f"`{ast.unparse(node)[:60]}` reaches a private name: test the public API"
                findings.append(
                    Finding(path=path, line=node.lineno, rule="private-call", message=msg)
                )
        elif isinstance(node, ast.Call) and _callee(node) in sleep_names:
            msg = "`time.sleep` in a test: wait on a condition or inject a clock instead"
            findings.append(Finding(path=path, line=node.lineno, rule="sleep", message=msg))
    return findings


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def analyse(path: str, text: str) -> tuple[list[Finding], int]:
    """Check one pytest file.

    Args:
        path: The file's repository path, copied into every finding.
        text: The file's content.

    Returns:
        The findings (a single `syntax` finding when the file does not parse) and the number of
        tests pytest would collect from it.
    """
    try:
        tree = parse(text, filename=path)
    except SyntaxError as exc:
        msg = f"the file does not parse as Python: {exc.msg}"
        return [Finding(path=path, line=exc.lineno or 1, rule="syntax", message=msg)], 0
    except ValueError as exc:  # e.g. null bytes, which Python 3.11 reports as ValueError
        msg = f"the file does not parse as Python: {exc}"
        return [Finding(path=path, line=1, rule="syntax", message=msg)], 0
    findings = _file_findings(path, tree) + hook_findings(path, tree, support=False)
    helpers = asserting_helpers(tree)
    tests = 0
    for fn in _test_functions(tree):
        tests += 1
        findings.extend(_test_findings(path, _gather(fn, helpers)))
    findings.sort(key=lambda f: (f.line, f.rule))
    return findings, tests
