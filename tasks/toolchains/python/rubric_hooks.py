"""Static rules about pytest's own machinery, on Python's `ast`: a test module or a conftest
that changes how results are reported (`result-hook`) or which tests run (`hidden-tests`).

A conftest is loaded with every test below it, so a hook there can turn the whole suite green:
``pytest_runtest_makereport`` rewriting a failure's outcome was the attack that made these
rules. What is flagged:

- `result-hook`: a definition of a hook that makes, logs or summarises a test's report or
  runs a test (:data:`REPORT_HOOKS`, anywhere in the file: module level or a plugin class);
  ``pytest_sessionfinish``/``pytest_unconfigure`` ending the run itself (``sys.exit``,
  ``os._exit``, ``pytest.exit``); any ``hookwrapper=True``/``wrapper=True`` hook
  implementation; an assignment to pytest's own objects, a session's result or an item's test
  body (``pytest.fail = ...``, ``_pytest.runner.x = ...``, ``TestReport.outcome = ...`` with
  ``TestReport`` imported from pytest, ``session.exitstatus = 0``, ``item.runtest = ...``),
  and ``setattr``, ``monkeypatch.setattr`` or ``mock.patch`` of them.
- `hidden-tests`: a definition of a collection hook (:data:`COLLECTION_HOOKS`); in a support
  file also ``collect_ignore``/``collect_ignore_glob``, ``pytestmark``, and ``pytest.skip``/
  ``xfail``/``importorskip`` or ``add_marker``/``applymarker`` called from it (it applies to
  every test below it).

Ordinary fixtures (``@pytest.fixture``, ``autouse`` included), ``pytest_configure`` registering
markers, ``pytest_addoption`` and imports of ``_pytest`` types for annotations stay allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tasks.core.types import Finding
from tasks.toolchains.python.parse import parse
from tasks.toolchains.python.pytest_config import pytest_option

#: Hooks that make, log, or summarise a test's report, or run the test itself.
REPORT_HOOKS = frozenset(
    {
        "pytest_runtest_makereport",
        "pytest_runtest_logreport",
        "pytest_report_teststatus",
        "pytest_runtest_protocol",
        "pytest_runtest_call",
        "pytest_pyfunc_call",
        "pytest_runtestloop",
        "pytest_terminal_summary",
        "pytest_report_to_serializable",
        "pytest_report_from_serializable",
        "pytest_assertion_pass",
        "pytest_exception_interact",
    }
)
#: Hooks that decide which tests are collected and run.
COLLECTION_HOOKS = frozenset(
    {
        "pytest_collection_modifyitems",
        "pytest_collect_file",
        "pytest_ignore_collect",
        "pytest_deselected",
        "pytest_collection",
        "pytest_make_collect_report",
        "pytest_pycollect_makeitem",
        "pytest_pycollect_makemodule",
        "pytest_collect_directory",
        "pytest_itemcollected",
    }
)
#: Hooks that may set the session's exit status.
EXIT_HOOKS = frozenset({"pytest_sessionfinish", "pytest_unconfigure"})
#: Attributes of a session that carry the run's result, and an item's test body.
RESULT_ATTRIBUTES = frozenset({"exitstatus", "testsfailed", "shouldfail", "shouldstop", "runtest"})
#: Calls that end the run with a status of the caller's choosing.
EXITS = frozenset({"sys.exit", "os._exit", "pytest.exit", "exit", "quit"})
#: Modules whose objects a test or support file must not replace.
PYTEST_MODULES = frozenset({"pytest", "_pytest"})
SKIPPERS = frozenset({"pytest.skip", "pytest.xfail", "pytest.importorskip"})
MARKERS = frozenset({"add_marker", "applymarker"})
IGNORE_LISTS = frozenset({"collect_ignore", "collect_ignore_glob"})


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _pytest_names(tree: ast.Module) -> frozenset[str]:
    """Names bound to pytest's modules or to what is imported from them (``import pytest``,
    ``from _pytest.runner import call_and_report``, ``from pytest import TestReport``)."""
    names = set(PYTEST_MODULES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PYTEST_MODULES:
                    names.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PYTEST_MODULES
        ):
            names.update(a.asname or a.name for a in node.names)
    return frozenset(names)


def _finding(path: str, node: ast.AST, rule: str, message: str) -> Finding:
    return Finding(path=path, line=getattr(node, "lineno", 1), rule=rule, message=message)


def _is_wrapper(decorator: ast.expr) -> bool:
    """``@pytest.hookimpl(hookwrapper=True)`` / ``(wrapper=True)``."""
    if not isinstance(decorator, ast.Call) or not _dotted(decorator.func).endswith("hookimpl"):
        return False
    return any(
        kw.arg in ("hookwrapper", "wrapper")
        and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
        for kw in decorator.keywords
    )


def _exits(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and _dotted(n.func) in EXITS for n in ast.walk(fn))


def _hook_findings(path: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Finding]:
    name = fn.name
    found: list[Finding] = []
    if name in REPORT_HOOKS:
        why = f"`{name}` changes how test results are made or reported: remove the hook"
        found.append(_finding(path, fn, "result-hook", why))
    elif name in COLLECTION_HOOKS:
        why = f"`{name}` changes which tests are collected or run: remove the hook"
        found.append(_finding(path, fn, "hidden-tests", why))
    elif name in EXIT_HOOKS and _exits(fn):
        why = f"`{name}` sets the session's exit status: remove it"
        found.append(_finding(path, fn, "result-hook", why))
    for decorator in fn.decorator_list:
        if _is_wrapper(decorator) and name not in REPORT_HOOKS:
            why = f"`{name}` is a hook wrapper: it can change any hook's result; remove it"
            found.append(_finding(path, decorator, "result-hook", why))
    return found


def _patch_target(node: ast.AST, pytest_names: frozenset[str]) -> str | None:
    """The dotted name an assignment, ``setattr`` or patch replaces, when it is pytest's own
    object or a session's result attribute (None otherwise)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if node.value.split(".")[0] in PYTEST_MODULES else None
    dotted = _dotted(node)
    if not dotted:
        return None
    if dotted.split(".")[0] in pytest_names:
        return dotted
    if isinstance(node, ast.Attribute) and node.attr in RESULT_ATTRIBUTES:
        return dotted
    return None


def _patch_findings(path: str, tree: ast.Module) -> list[Finding]:
    names = _pytest_names(tree)
    found: list[Finding] = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call):
            callee = _dotted(node.func).split(".")
            patches = callee[-1] == "setattr" or ("patch" in callee and callee[-1] != "dict")
            if patches and node.args:
                targets = [node.args[0]]
        for target in targets:
            replaced = _patch_target(target, names)
            if replaced is not None:
                why = f"replaces `{replaced[:60]}`: pytest's results must stay pytest's"
                found.append(_finding(path, node, "result-hook", why))
    return found


def _skip_findings(path: str, tree: ast.Module) -> list[Finding]:
    """What skips or hides tests from a support file (it applies to every test below it)."""
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in IGNORE_LISTS:
                    why = f"`{target.id}` hides test files from collection"
                    found.append(_finding(path, node, "hidden-tests", why))
                elif isinstance(target, ast.Name) and target.id == "pytestmark":
                    why = "`pytestmark` in a support file marks every test below it"
                    found.append(_finding(path, node, "hidden-tests", why))
        elif isinstance(node, ast.Call):
            callee = _dotted(node.func)
            if callee in SKIPPERS or callee.split(".")[-1] in MARKERS:
                why = f"`{callee}` in a support file skips or marks tests wholesale"
                found.append(_finding(path, node, "hidden-tests", why))
    return found


def hook_findings(path: str, tree: ast.Module, *, support: bool) -> list[Finding]:
    """The `result-hook` and `hidden-tests` findings of one parsed file; `support` adds the
    rules that only a file loaded with other tests (a conftest) can break."""
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.extend(_hook_findings(path, node))
    found.extend(_patch_findings(path, tree))
    if support:
        found.extend(_skip_findings(path, tree))
    return found


def support_findings(path: str, text: str) -> list[Finding]:
    """The findings of a support file (a conftest, a helper module under the test roots): the
    rules above, with those only a support file can break; [] for a file that is not Python."""
    if not path.endswith(".py"):
        return []
    try:
        tree = parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        msg = f"the file does not parse as Python: {getattr(exc, 'msg', exc)}"
        return [
            Finding(path=path, line=getattr(exc, "lineno", None) or 1, rule="syntax", message=msg)
        ]
    return sorted(hook_findings(path, tree, support=True), key=lambda f: (f.line, f.rule))


def canary_test(repo: Path, text: str, token: str) -> str:
    """`text` with one more test function that must fail, named by the project's
    ``python_functions`` (``test`` by default) and `token`."""
    pattern = (pytest_option(repo, "python_functions") or ["test"])[0]
    name = f"autopilot_canary_{token}"
    name = pattern.replace("*", name, 1) if "*" in pattern else f"{pattern}_{name}"
    body = '    assert 1 == 2, "autopilot canary: this test must fail"\n'
    return f"{text.rstrip()}\n\n\ndef {name}():\n{body}"
