"""Small modules, short functions: none of tasks/, judge/ or flows/ grows past the house's
limits without saying why.

A module over :data:`MAX_MODULE_LINES` lines, or a function whose code (its docstring aside) is
over :data:`MAX_FUNCTION_LINES` lines, fails unless a ``# size:`` comment on the line above the
function (or in the module's first lines) gives the reason it must stay whole.
"""

from __future__ import annotations

import ast

from tests.paths import REPO_ROOT

MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 60
REASON = "# size:"


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    start = first.end_lineno + 1 if docstring and first.end_lineno else first.lineno
    return (node.end_lineno or node.lineno) - start + 1


def oversized() -> list[str]:
    found: list[str] = []
    for top in ("tasks", "judge", "flows"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            lines = path.read_text(encoding="utf-8").splitlines()
            if len(lines) > MAX_MODULE_LINES and not any(REASON in ln for ln in lines[:30]):
                found.append(f"{rel}: {len(lines)} lines")
            for node in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if _code_lines(node) > MAX_FUNCTION_LINES and REASON not in lines[first - 2]:
                    found.append(f"{rel}:{node.lineno}: {node.name}: {_code_lines(node)} lines")
    return found


def test_modules_and_functions_stay_small() -> None:
    assert oversized() == []
