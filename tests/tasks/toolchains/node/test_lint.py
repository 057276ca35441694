"""node-jest lint: real ESLint in the sandbox, with the default configuration or the project's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.toolchains.base import ToolchainError
from tasks.toolchains.node.lint import eslint_argv, lint, parse_eslint_json, project_eslint_config
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for, write_project

pytestmark = pytest.mark.slow

MESSY = (
    'import { add } from "./calc";\n\n'
    "var total = 0;\n"
    "let step = 2;\n"
    'test("adds", () => {\n'
    "  total = add(total, step);\n"
    "  expect(total).toBe(2);\n"
    "});\n"
)
CALC = "export const add = (a: number, b: number): number => a + b;\n"


def test_default_configuration_fixes_what_it_can(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "p",
        {"src/calc.ts": CALC, "src/calc.test.ts": MESSY, "src/bad.test.js": "let x = ;\n"},
    )
    tools = tools_for(repo)
    runner = bwrap_runner(repo, tools)
    found = lint(repo, ["src/calc.test.ts", "src/bad.test.js"], False, runner, tools)
    rules = sorted((o.path, o.line, o.rule, o.correctable) for o in found)
    assert rules == [
        ("src/bad.test.js", 1, "syntax-error", False),
        ("src/calc.test.ts", 3, "no-var", True),
        ("src/calc.test.ts", 4, "prefer-const", True),
    ]
    assert lint(repo, ["src/calc.test.ts"], True, runner, tools) == []
    fixed = (repo / "src/calc.test.ts").read_text()
    assert "let total = 0;" in fixed and "const step = 2;" in fixed


def test_the_project_configuration_wins(tmp_path: Path) -> None:
    config = 'export default [{ rules: { "no-console": "error", semi: ["error", "always"] } }];\n'
    test = 'test("x", () => {\n  console.log("hi")\n  expect(1).toBe(1);\n});\n'
    repo = write_project(
        tmp_path / "p", {"eslint.config.mjs": config, "src/a.test.js": test}, tsconfig=False
    )
    tools = tools_for(repo)
    assert project_eslint_config(repo) == ("eslint.config.mjs", False)
    assert "--config" not in eslint_argv(repo, tools, ["src/a.test.js"], False)
    found = lint(repo, ["src/a.test.js"], False, bwrap_runner(repo, tools), tools)
    assert sorted(o.rule for o in found) == ["no-console", "semi"]


def test_a_configuration_that_does_not_load_is_one_clear_error(tmp_path: Path) -> None:
    config = 'import react from "eslint-plugin-react-not-installed";\nexport default [react];\n'
    repo = write_project(
        tmp_path / "p", {"eslint.config.mjs": config, "src/a.test.js": "test('x', () => {});\n"}
    )
    tools = tools_for(repo)
    with pytest.raises(ToolchainError) as err:
        lint(repo, ["src/a.test.js"], False, bwrap_runner(repo, tools), tools)
    message = str(err.value)
    assert message.startswith("eslint: ")
    assert "eslint-plugin-react-not-installed" in message
    assert message.endswith("(with the project's eslint.config.mjs)")
    assert "\n" not in message


def test_legacy_configuration_is_recognised(tmp_path: Path) -> None:
    (tmp_path / ".eslintrc.json").write_text("{}")
    assert project_eslint_config(tmp_path) == (".eslintrc.json", True)
    (tmp_path / "package.json").write_text('{"eslintConfig": {}}')
    (tmp_path / ".eslintrc.json").unlink()
    assert project_eslint_config(tmp_path) == ("package.json", True)


def test_warnings_are_not_offences_and_garbage_is_refused(tmp_path: Path) -> None:
    messages = [
        {"ruleId": "no-console", "severity": 1, "message": "w", "line": 1, "column": 1},
        {"ruleId": "semi", "severity": 2, "message": "e", "line": 2, "column": 3, "fix": {}},
    ]
    report = json.dumps([{"filePath": f"{tmp_path}/a.test.js", "messages": messages}])
    found = parse_eslint_json(report, tmp_path)
    assert [(o.path, o.rule, o.line, o.correctable) for o in found] == [
        ("a.test.js", "semi", 2, True)
    ]
    with pytest.raises(ToolchainError, match="eslint printed no JSON report"):
        parse_eslint_json("Oops! Something went wrong!", tmp_path)
