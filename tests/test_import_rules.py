"""The arrows between the parts, as each package's docstring declares them.

Every package of tasks/, judge/ and flows/ whose ``__init__`` docstring has a ``May import:``
line is a part; a module belongs to the innermost part holding it. An import (at any depth of a
module, lazy ones included) is allowed within the module's own part, to an enclosing part, or to a
part or module its ``May import:`` line names (or a package inside one), unless that part says
``Imported only by:`` and the importer is not one of those. Nothing outside flows/ imports flows/;
the declared arrows form no cycle; no two modules import each other at module level.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.paths import REPO_ROOT

TOP = ("tasks", "judge", "flows")
_LINE = re.compile(r"^(May import|Imported only by):(.*?)(?=^\S[^\n]*:|\Z)", re.M | re.S)


@dataclass
class Part:
    name: str
    may_import: list[str] = field(default_factory=list)
    only_by: list[str] | None = None


def _names(text: str) -> list[str]:
    text = re.sub(r"\(.*?\)", "", text, flags=re.S)  # remarks in brackets
    found = re.findall(r"\b(?:tasks|judge|flows)(?:\.\w+)*\b", text)
    return [n for n in found]


def parts() -> dict[str, Part]:
    out: dict[str, Part] = {}
    for top in TOP:
        for init in sorted((REPO_ROOT / top).rglob("__init__.py")):
            package = ".".join(init.parent.relative_to(REPO_ROOT).parts)
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            lines = {m.group(1): m.group(2) for m in _LINE.finditer(doc)}
            if "May import" not in lines:
                continue
            part = Part(package, _names(lines["May import"]))
            if "Imported only by" in lines:
                part.only_by = _names(lines["Imported only by"])
            out[package] = part
    return out


def modules() -> dict[str, tuple[str, str]]:
    """module name -> (repository path, source text)."""
    out: dict[str, tuple[str, str]] = {}
    for top in TOP:
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).with_suffix("")
            if "resources" in rel.parts:  # files copied into test runs, not Autopilot's code
                continue
            name = ".".join(rel.parts).removesuffix(".__init__")
            out[name] = (path.relative_to(REPO_ROOT).as_posix(), path.read_text(encoding="utf-8"))
    return out


def imports(source: str, *, top_level_only: bool = False) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import of Autopilot's own packages in `source`."""
    tree = ast.parse(source)
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in TOP:
                yield node.lineno, node.module
                for alias in node.names:
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in TOP:
                    yield node.lineno, alias.name


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def part_of(module: str, all_parts: dict[str, Part]) -> str:
    holders = [p for p in all_parts if _within(module, p)]
    return max(holders, key=len) if holders else module.split(".")[0]


def _resolve(target: str, known: dict[str, tuple[str, str]]) -> str | None:
    """The module an import names (``from a.b import c`` may name a module or an object)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def violations(extra: dict[str, str] | None = None) -> list[str]:
    """Every import that breaks an arrow; `extra` adds modules (name -> source) to check."""
    all_parts = parts()
    known = modules()
    for name, source in (extra or {}).items():
        known[name] = (name.replace(".", "/") + ".py", source)
    found: dict[str, None] = {}
    for name, (path, source) in known.items():
        mine = part_of(name, all_parts)
        rule = all_parts.get(mine)
        for line, raw in imports(source):
            target = _resolve(raw, known)
            if target is None:
                continue
            theirs = part_of(target, all_parts)
            where = f"{path}:{line}: {name} imports {target}"
            if _within(theirs, "flows") and not _within(mine, "flows"):
                found.setdefault(f"{where}: nothing outside flows/ imports flows/")
                continue
            if theirs == mine or _within(mine, theirs):
                continue
            sealed = all_parts[theirs].only_by if theirs in all_parts else None
            if sealed is not None:
                if not any(_within(name, who) for who in sealed):
                    found.setdefault(f"{where}: {theirs} is imported only by {', '.join(sealed)}")
                continue
            allowed = rule.may_import if rule else []
            if not any(_within(theirs, a) or _within(target, a) for a in allowed):
                found.setdefault(
                    f"{where}: {mine} may import only {', '.join(allowed) or 'nothing'}"
                )
    return list(found)


def test_every_import_follows_the_declared_arrows() -> None:
    assert violations() == []


def test_the_parts_are_declared() -> None:
    declared = set(parts())
    expected = {
        "tasks",
        "tasks.core",
        "tasks.facts",
        "tasks.sandbox",
        "tasks.keep",
        "tasks.model",
        "tasks.toolchains",
        "tasks.audit",
        "tasks.generate",
        "tasks.repair",
        "tasks.evaluate",
        "tasks.history",
        "tasks.premerge",
        "tasks.forge",
        "judge",
        "flows",
        "flows.commands",
    }
    assert expected <= declared


def test_the_facts_and_the_sandbox_never_import_the_model() -> None:
    rules = parts()
    for name in ("tasks.core", "tasks.facts", "tasks.sandbox", "tasks.toolchains"):
        assert not any(_within(a, "tasks.model") for a in rules[name].may_import), name


def test_the_declared_arrows_form_no_cycle() -> None:
    rules = parts()
    graph = {
        p: {
            q
            for a in r.may_import
            for q in rules
            if _within(q, a) and q != p and rules[q].only_by is None
        }
        for p, r in rules.items()
    }
    # An enclosing part is reachable from its children implicitly; only declared arrows count.
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if _within(node, nxt):
                continue
            if state.get(nxt) == 1:
                pytest.fail("cycle: " + " -> ".join([*trail, node, nxt]))
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_no_two_modules_import_each_other_at_module_level() -> None:
    known = modules()
    graph = {
        name: {t for _, raw in imports(src, top_level_only=True) if (t := _resolve(raw, known))}
        - {name}
        for name, (_, src) in known.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            strong(name)
    assert cycles == []


@pytest.mark.parametrize(
    ("module", "source", "why"),
    [
        (
            "tasks.sandbox.planted",
            "from tasks.model.client import ModelClient\n",
            "may import only",
        ),
        ("tasks.facts.planted", "def f():\n    import tasks.model.prompts\n", "may import only"),
        ("tasks.repair.planted", "from flows.nightly import nightly\n", "imports flows/"),
        ("tasks.generate.planted", "from tasks.repair.scout import read_reports\n", "only"),
        ("flows.commands.planted", "from tasks.keep.git import worktree\n", "may import"),
        ("flows.commands.planted", "from tasks.repair.scout import check_reports\n", "import"),
    ],
)
def test_the_checker_catches_a_forbidden_import(module: str, source: str, why: str) -> None:
    """The checker itself: a planted module that breaks an arrow is reported, lazily or not."""
    found = [v for v in violations({module: source}) if module in v]
    assert found and why in found[0]
