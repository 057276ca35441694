"""NodeJestToolchain: the node-jest stack behind today's Toolchain base class (redaction, prepare
commands, the configuration digest), and plain JavaScript projects (CommonJS and ES modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.toolchains.node.toolchain import NodeJestToolchain
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for, write_project

pytestmark = pytest.mark.slow

LEAK = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_results_are_redacted_and_prepare_runs_once(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "p",
        {
            "lib/token.js": "exports.token = () => process.env.LEAKED || 'none';\n",
            "lib/token.test.js": (
                'const { token } = require("./token");\n'
                'test("leaks", () => {\n'
                f'  expect(token()).toBe("{LEAK}x");\n'
                "});\n"
            ),
        },
        tsconfig=False,
    )
    chain = NodeJestToolchain(prepare=("node -e \"require('fs').writeFileSync('made.txt','1')\"",))
    runner = bwrap_runner(repo, tools_for(repo))
    v = chain.run_specs(repo, ["lib/token.test.js"], "lib/token.js", runner)
    assert v.loaded and not v.passed
    assert v.toolchain == "node-jest"
    assert LEAK not in v.model_dump_json()
    assert "[REDACTED]" in (v.examples[0].message or "") + (v.examples[0].trace or "")
    assert (repo / "made.txt").read_text() == "1"
    (repo / "made.txt").unlink()
    chain.run_specs(repo, ["lib/token.test.js"], None, runner, coverage=False)
    assert not (repo / "made.txt").exists()  # once per worktree


def test_missing_tools_are_a_run_that_did_not_start(tmp_path: Path) -> None:
    repo = write_project(tmp_path / "p", {"a.test.js": "test('a', () => {});\n"})
    chain = NodeJestToolchain(tools_home=tmp_path / "no-tools")
    assert not any("no-tools" in d for d in chain.sandbox_dirs(repo))
    suite = chain.run_suite(repo, bwrap_runner(repo, tools_for(repo)))
    v = suite.validation
    assert not v.loaded and v.problem is not None and v.problem.cause == "environment"
    assert "run `make setup`" in (v.load_error or "")


def test_config_digest_follows_the_project_configuration(tmp_path: Path) -> None:
    repo = write_project(tmp_path / "p", {"a.test.js": "test('a', () => {});\n"})
    chain = NodeJestToolchain()
    before = chain.config_digest(repo)
    assert chain.config_digest(repo) == before
    (repo / "jest.config.js").write_text("module.exports = {};\n")
    assert chain.config_digest(repo) != before
    assert NodeJestToolchain(node_modules="web/node_modules").config_digest(repo) != (
        chain.config_digest(repo)
    )


@pytest.mark.parametrize("module_type", ["module", "commonjs"])
def test_plain_javascript_projects(tmp_path: Path, module_type: str) -> None:
    esm = module_type == "module"
    body = "(n) => {\n  if (n % 2) {\n    throw new Error(`odd: ${n}`);\n  }\n  return n / 2;\n};\n"
    source = f"export const half = {body}" if esm else f"exports.half = {body}"
    load = (
        'import { half } from "../lib/half.js";\n'
        if esm
        else 'const { half } = require("../lib/half");\n'
    )
    repo = write_project(
        tmp_path / "p",
        {
            "package.json": f'{{"name": "plain", "type": "{module_type}"}}\n',
            "lib/half.js": source,
            "test/half.spec.js": load + 'test("halves", () => expect(half(4)).toBe(2));\n',
        },
        tsconfig=False,
    )
    chain = NodeJestToolchain()
    runner = bwrap_runner(repo, tools_for(repo))
    suite = chain.run_suite(repo, runner)
    v = suite.validation
    assert v.passed, v.load_error
    assert [e.file for e in v.examples] == ["test/half.spec.js"]
    assert suite.files["lib/half.js"].uncovered_lines == [3]  # the throw: never reached
    assert chain.lint(repo, ["test/half.spec.js"], False, runner) == []
