"""node-jest through the interface only (the registry, ``FileRules``, the mapping engine, the
load errors of real Jest runs, the syntax checks in the sandbox, mutations, settings), as every
part of Autopilot asks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, load_settings
from tasks.core.errors import ConfigError
from tasks.sandbox.docker import DockerRunner
from tasks.sandbox.make import make_runner
from tasks.toolchains import registry
from tasks.toolchains.mapping import map_repo
from tasks.toolchains.mutants import apply
from tasks.toolchains.node.toolchain import NodeJestToolchain
from tests.examples_repo import EXAMPLES, make_example_repo
from tests.tasks.toolchains.node.helpers import write_project

ORDERS = EXAMPLES / "node_orders"


def test_registered_detected_and_configured(tmp_path: Path) -> None:
    assert "node-jest" in registry.names()
    assert registry.detect_toolchain(ORDERS) == "node-jest"
    assert registry.by_language("typescript") is NodeJestToolchain
    assert registry.owner_of_kind("node-route") is NodeJestToolchain
    assert "node_modules" in registry.env_dirs()
    assert {"package.json", "jest.config.*", "tsconfig.json"} <= set(registry.manifests())
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "package.json").write_text('{"name": "x"}\n')
    assert not NodeJestToolchain.detect(plain)  # a package.json alone is no Jest project
    (plain / "a.test.js").write_text("test('a', () => {});\n")
    assert NodeJestToolchain.detect(plain)


def test_node_modules_setting(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "web" / "node_modules").mkdir(parents=True)
    (repo / "autopilot.toml").write_text('node_modules = "web/node_modules"\n')
    settings = load_settings(repo)
    assert settings.node_modules == str(repo / "web" / "node_modules")
    chain = registry.toolchain_for(settings, "node-jest")
    assert isinstance(chain, NodeJestToolchain)
    assert chain.node_modules == settings.node_modules
    worktree = tmp_path / "wt"
    worktree.mkdir()
    # Outside the worktree (git ignores node_modules): shown read-only, first on NODE_PATH.
    assert settings.node_modules in chain.sandbox_dirs(worktree)
    tools = chain.tools(worktree)
    assert tools.node_path().startswith(settings.node_modules)
    (repo / "autopilot.toml").write_text('node_modules = "nowhere"\n')
    with pytest.raises(ConfigError, match="node_modules"):
        load_settings(repo)


def test_the_mapping_engine_maps_the_example() -> None:
    mapping = map_repo(ORDERS)
    assert mapping.toolchain == "node-jest"
    by = {m.source: m for m in mapping.files}
    assert by["src/util/money.ts"].specs == ["src/util/money.test.ts"]
    assert by["src/util/money.ts"].kind == "node-utility"
    assert by["src/discounts.ts"].specs == []
    assert by["src/discounts.ts"].expected_spec == "src/discounts.test.ts"
    assert sorted(mapping.untested) == [
        "src/components/statusBadge.ts",
        "src/discounts.ts",
        "src/server.ts",
        "src/util/dates.ts",
    ]


@pytest.mark.parametrize(
    ("path", "test", "support", "test_side"),
    [
        ("src/a.test.ts", True, False, True),
        ("src/__tests__/a.tsx", True, False, True),
        ("test/a.spec.js", True, False, True),
        ("jest.setup.ts", False, True, True),
        ("src/__mocks__/axios.ts", False, True, True),
        ("test/helpers/db.ts", False, True, True),
        ("src/api/spec/thing.ts", False, False, False),
        ("src/orders.ts", False, False, False),
        ("node_modules/x/a.test.js", False, False, False),
    ],
)
def test_file_rules(path: str, test: bool, support: bool, test_side: bool) -> None:
    rules = NodeJestToolchain().file_rules(ORDERS)
    assert rules.is_test_file(path) is test
    assert rules.is_support_file(path) is support
    assert rules.is_test_side(path) is test_side


@pytest.mark.slow
def test_load_errors_of_a_real_run(tmp_path: Path) -> None:
    """Syntax error, missing module and TypeScript type error, as Jest prints them, read back
    through the interface the audit's baseline uses."""
    repo = write_project(
        tmp_path / "p",
        {
            "package.json": '{"name": "p"}\n',
            "src/ok.ts": "export const one = (): number => 1;\n",
            "src/ok.test.ts": (
                'import { one } from "./ok";\ntest("one", () => expect(one()).toBe(1));\n'
            ),
            "src/syntax.test.ts": 'test("x", () => {\n  expect(1).toBe(1;\n});\n',
            "src/missing.test.ts": (
                'import { x } from "./gone";\ntest("x", () => expect(x).toBe(1));\n'
            ),
            "src/types.test.ts": 'const n: number = "a";\ntest("n", () => expect(n).toBe(1));\n',
        },
    )
    chain = NodeJestToolchain()
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=180),
        repo,
        toolchain_dirs=chain.sandbox_dirs(repo),
        cache_dir=tmp_path / "cache",
    )
    suite = chain.run_suite(repo, runner)
    v = suite.validation
    assert not v.loaded
    broken = ["src/missing.test.ts", "src/syntax.test.ts", "src/types.test.ts"]
    assert sorted(chain.load_error_files(v.load_error or "")) == broken
    missing = chain.load_problem(suite.load_errors["src/missing.test.ts"], repo)
    assert missing.cause == "project" and "Cannot find module './gone'" in missing.message
    assert missing.error_type == "TS2307"  # ts-jest reports it while type-checking
    types = chain.load_problem(suite.load_errors["src/types.test.ts"], repo)
    assert types.error_type == "TS2322" and types.line == 1
    assert types.file == "src/types.test.ts"
    syntax = chain.load_problem(suite.load_errors["src/syntax.test.ts"], repo)
    assert syntax.cause == "project" and syntax.file == "src/syntax.test.ts"
    assert "src/syntax.test.ts" in syntax.message
    again = chain.run_suite(repo, runner, exclude=broken)
    assert again.validation.passed and again.files["src/ok.ts"].uncovered_lines == []


@pytest.mark.slow
def test_syntax_checks_run_in_the_sandbox(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "p",
        {
            "good.ts": "export const f = (n: number): number => n + 1;\n",
            "bad.ts": "export const f = (n: number: number => n + 1;\n",
            "good.cjs": "module.exports = 1;\n",
            "bad.cjs": "module.exports = ;\n",
            "esm.js": "export const g = () => <div />;\n",
        },
    )
    chain = NodeJestToolchain()
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=60),
        repo,
        toolchain_dirs=chain.sandbox_dirs(repo),
        cache_dir=tmp_path / "cache",
    )
    assert chain.syntax_check("README.md") is None
    assert registry.syntax_check("good.ts") is not None  # the registry asks node-jest
    exits = {}
    for name in ("good.ts", "bad.ts", "good.cjs", "bad.cjs", "esm.js"):
        argv = chain.syntax_check(name)
        assert argv is not None
        exits[name] = runner.run(argv, cwd=repo, timeout_s=60).exit_code
    assert exits == {"good.ts": 0, "bad.ts": 1, "good.cjs": 0, "bad.cjs": 1, "esm.js": 0}


def test_body_lines_and_mutations() -> None:
    text = (
        "export function price(n: number): number {\n"
        "  if (n === 0) {\n"
        "    return 10;\n"
        "  }\n"
        "  return n * 2 + 1;\n"
        "}\n"
        "export const half = (n: number) => n / 2 - 3;\n"
        "const LIMIT = 5;\n"
    )
    chain = NodeJestToolchain()
    lines = chain.body_lines("src/p.ts", text)
    assert lines == {2, 3, 4, 5, 7}
    found = list(chain.mutations("src/p.ts", text, {2, 3, 5, 8}))
    described = sorted(m.describe() for m in found)
    assert described == [
        "src/p.ts:2: 0 -> 1",
        "src/p.ts:2: === -> !==",
        "src/p.ts:3: 10 -> 11",
        "src/p.ts:5: + -> -",
        "src/p.ts:5: 1 -> 2",
        "src/p.ts:5: 2 -> 3",
        "src/p.ts:8: 5 -> 6",
    ]
    for mutation in found:
        mutated = apply(text, mutation)
        assert mutated != text and chain.mutant_ok(mutated)
    assert not chain.mutant_ok("export const = ;\n")
    assert chain.body_lines("a.rb", "def x; end") is None


def test_context_and_versions(tmp_path: Path) -> None:
    repo = make_example_repo("node_orders", tmp_path / "orders")
    chain = NodeJestToolchain()
    source = "src/handlers/orders.ts"
    paths = chain.context_paths(repo, source, "node-route", (repo / source).read_text())
    assert "src/orders.ts" in paths and "tsconfig.json" in paths
    assert source not in paths
    versions = chain.versions(repo)
    assert "jest" in versions and "typescript" in versions


def test_docker_shows_the_toolchain_dirs(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    runner = DockerRunner(
        SandboxSettings(backend="docker"), tmp_path, toolchain_dirs=[tools], cache_dir=tmp_path
    )
    assert str(tools) in runner.read_only_dirs("/usr/bin/node")
