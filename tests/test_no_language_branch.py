"""No part branches on the language: only the stacks' folders (tasks/toolchains/<stack>/) name
their languages, tools and files; everything else asks the toolchain.

The check reads every string literal of tasks/, judge/ and flows/ outside the stack folders
(docstrings aside) and looks for a stack's words: its language, its tools, its file names. A
short allow-list names the few places that must, and why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import REPO_ROOT

#: A stack's words: languages, test runners, linters, coverage tools, file and folder names.
STACK_WORDS = re.compile(
    r"(?i)ruby|rspec|rails|gemfile|bundler|rubocop|simplecov|factory_?bot|\.rb\b|_spec\.rb"
    r"|python|pytest|\bruff\b|conftest|coverage\.py|\.py\b|\btest_\*"
)
#: Where a stack's words may stand outside its folder, and why.
ALLOWED: dict[str, str] = {
    "tasks/toolchains/registry.py": "the registration of the stacks, by name",
    "tasks/facts/": "report, stack-trace and coverage formats are named after the tools that "
    "write them (any runner writes JUnit XML; RSpec JSON and SimpleCov are formats)",
    "flows/cli.py": "the help text names the report formats (JUnit XML, RSpec JSON)",
    "tasks/core/types.py": "field descriptions name the report formats and tools, as examples",
    "tasks/core/config.py": "the settings a stack reads (the project's Python interpreter)",
    "tasks/core/operator_only.py": "the same settings, by name, with what a repository may do",
    "tasks/core/host_paths.py": "history files under a home that hold what was typed "
    "(.python_history beside .bash_history): never shown to a sandbox",
    "flows/demo/": "the scripted demo model's replies are written for the bundled Rails example",
    "tasks/core/secrets.py": "code file suffixes of many languages: credentials.rb is code",
    "tasks/sandbox/resources/egress_forward.py": "the install step's egress forwarder is a "
    "script of Autopilot's own interpreter, whatever the project's stack",
    "tasks/sandbox/base.py": "names that forwarder's file (tasks/sandbox/resources/)",
    "tasks/sandbox/view.py": "the /etc entries the stacks' tools read are in the view the "
    "sandbox builds before any toolchain is chosen",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def stack_words_outside_the_stacks() -> list[str]:
    """``path:line: literal`` for every string literal naming a stack outside its folder."""
    found: list[str] = []
    for top in ("tasks", "judge", "flows"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            parts = rel.split("/")
            if parts[:2] == ["tasks", "toolchains"] and len(parts) > 3:
                continue  # a stack's own folder
            if any(rel.startswith(allowed) for allowed in ALLOWED):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                    continue
                if id(node) not in docs and STACK_WORDS.search(node.value):
                    found.append(f"{rel}:{node.lineno}: {node.value[:80]!r}")
    return found


def test_no_part_outside_the_stacks_names_a_language() -> None:
    assert stack_words_outside_the_stacks() == []


def test_the_check_sees_a_branch(tmp_path: Path) -> None:
    """The pattern catches the branches this project used to have."""
    for literal in ('"ruby-rspec"', '"python"', '".rb"', '"_spec.rb"', '"conftest.py"'):
        assert STACK_WORDS.search(literal), literal
    assert not STACK_WORDS.search('"expected_spec"')


def test_every_stack_folder_holds_one_toolchain() -> None:
    from tasks.toolchains import registry

    for name in registry.names():
        cls = registry.toolchain_class(name)
        folder = cls.__module__.rsplit(".", 1)[0]
        assert folder.startswith("tasks.toolchains.") and folder.count(".") == 2, folder
        assert cls.language and cls.kinds and cls.test_tool and cls.detection
