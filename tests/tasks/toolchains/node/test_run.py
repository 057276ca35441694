"""node-jest runs: real Jest, ts-jest and jest-junit in the bwrap sandbox, on the example app and
on small projects that fail in the ways real ones do."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from tasks.core.types import CommandResult
from tasks.toolchains.base import SuiteResult, ToolchainError
from tasks.toolchains.node.run import coverage_sources, run_jest
from tasks.toolchains.node.tools import resolve_tools
from tests.examples_repo import make_example_repo
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for, write_project

pytestmark = pytest.mark.slow

TESTED = {
    "src/orders.ts",
    "src/util/money.ts",
    "src/handlers/orders.ts",
    "src/components/orderSummary.ts",
    "src/server.ts",
}


class SummaryRunner:
    """The real sandbox runner, asking Jest for its own coverage summary beside the JSON."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> CommandResult:
        extra = ["--coverageReporters=json-summary"] if "--coverage" in argv else []
        return self.inner.run(argv + extra, cwd=cwd, env=env, timeout_s=timeout_s)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_example_repo("node_orders", tmp_path_factory.mktemp("node") / "orders")


@pytest.fixture(scope="module")
def suite(orders: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[SuiteResult, Path]:
    tools = tools_for(orders)
    reports = tmp_path_factory.mktemp("reports")
    runner = SummaryRunner(bwrap_runner(orders, tools))
    result = run_jest(orders, [], None, runner, tools, reports_dir=reports)
    return result, reports


def test_the_example_suite_passes_in_the_sandbox(suite: tuple[SuiteResult, Path]) -> None:
    result, _ = suite
    v = result.validation
    assert v.loaded, v.load_error
    assert v.passed
    assert v.toolchain == "node-jest"
    files = {e.file for e in v.examples}
    assert files == {
        "src/orders.test.ts",
        "src/util/money.test.ts",
        "src/handlers/orders.test.ts",
        "src/components/orderSummary.test.ts",
    }
    # supertest reached the server on the sandbox's own loopback; jsdom loaded by docblock.
    routes = [e for e in v.examples if e.file == "src/handlers/orders.test.ts"]
    assert len(routes) == 4 and all(e.status == "passed" for e in routes)
    assert all(e.line is not None and e.line > 0 for e in v.examples)
    assert result.load_errors == {}


def test_coverage_equals_what_jest_itself_reports(
    suite: tuple[SuiteResult, Path], orders: Path
) -> None:
    result, reports = suite
    summary = json.loads((reports / "coverage" / "coverage-summary.json").read_text())
    theirs = {
        str(Path(k).relative_to(orders)): (v["lines"]["covered"], v["lines"]["total"])
        for k, v in summary.items()
        if k != "total"
    }
    ours = {k: (f.covered_lines, f.executable_lines) for k, f in result.files.items()}
    assert ours == theirs
    # Every mapped source is measured, the untested ones at zero.
    assert set(ours) == set(coverage_sources(orders))
    for path, cov in result.files.items():
        assert (cov.covered_lines > 0) is (path in TESTED), path
        assert len(cov.uncovered_lines) == cov.executable_lines - cov.covered_lines


def test_one_spec_with_a_target(orders: Path) -> None:
    tools = tools_for(orders)
    result = run_jest(
        orders,
        ["src/util/money.test.ts"],
        "src/util/money.ts",
        bwrap_runner(orders, tools),
        tools,
    )
    v = result.validation
    assert v.passed
    assert {e.file for e in v.examples} == {"src/util/money.test.ts"}
    assert v.coverage is not None and v.coverage.path == "src/util/money.ts"
    assert v.coverage.uncovered_lines == [28]  # splitCents' guard: never thrown by the spec
    assert set(result.files) == {"src/util/money.ts"}
    assert v.specs == ["src/util/money.test.ts"] and v.target == "src/util/money.ts"


BROKEN = {
    "src/calc.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
    "src/calc.test.ts": (
        'import { add } from "./calc";\n\ntest("adds", () => {\n  expect(add(1, 2)).toBe(3);\n'
        '});\n\ntest("fails", () => {\n  expect(add(2, 2)).toBe(5);\n});\n'
    ),
    "src/syntax.test.ts": (
        'import { add } from "./calc";\ntest("x", () => {\n  expect(add(1, 1)\n});\n'
    ),
    "src/missing.test.ts": (
        'import { nope } from "./nowhere";\ntest("y", () => expect(nope).toBe(1));\n'
    ),
    "src/typed.ts": (
        "export const label: string = 42;\nexport const twice = (n: number) => n * 2;\n"
    ),
    "src/typed.test.ts": (
        'import { twice } from "./typed";\ntest("z", () => expect(twice(2)).toBe(4));\n'
    ),
    "src/package.test.js": 'const left = require("left-pad-not-installed");\ntest("p", () => '
    "expect(left).toBe(1));\n",
    "src/throws.test.js": 'throw new TypeError("config is not loaded");\n',
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SuiteResult]:
    repo = write_project(tmp_path_factory.mktemp("broken") / "p", BROKEN)
    tools = tools_for(repo)
    return repo, run_jest(repo, [], None, bwrap_runner(repo, tools), tools)


def test_suites_that_fail_to_run_are_never_a_pass(broken: tuple[Path, SuiteResult]) -> None:
    _, result = broken
    v = result.validation
    assert not v.loaded and not v.passed
    assert set(result.load_errors) == {
        "src/syntax.test.ts",
        "src/missing.test.ts",
        "src/typed.test.ts",
        "src/package.test.js",
        "src/throws.test.js",
    }
    errors = result.load_errors
    assert "TS1005: ',' expected" in errors["src/syntax.test.ts"]
    assert "Cannot find module './nowhere'" in errors["src/missing.test.ts"]
    # The type error is in the source the test imports, reported with its real message.
    assert (
        "src/typed.ts:1:14 - error TS2322: Type 'number' is not assignable to type "
        in (errors["src/typed.test.ts"])
    )
    assert "Cannot find module 'left-pad-not-installed'" in errors["src/package.test.js"]
    assert "TypeError: config is not loaded" in errors["src/throws.test.js"]
    assert v.load_error is not None and "src/typed.ts:1:14" in v.load_error
    assert "\x1b[" not in v.load_error
    # The suites that ran are still reported, the failing example with where it failed.
    failed = next(e for e in v.examples if e.name.endswith("fails"))
    assert failed.status == "failed"
    assert failed.message is not None and "expect(received).toBe(expected)" in failed.message
    assert failed.locations[-1].path == "src/calc.test.ts"
    assert failed.locations[-1].line == 8
    assert all(not loc.path.startswith("/") for loc in failed.locations)


@pytest.mark.parametrize(
    ("spec", "cause", "file", "line", "error_type"),
    [
        ("src/typed.test.ts", "project", "src/typed.ts", 1, "TS2322"),
        ("src/syntax.test.ts", "project", "src/syntax.test.ts", 4, "TS1005"),
        ("src/package.test.js", "environment", "src/package.test.js", None, "ModuleNotFoundError"),
    ],
)
def test_what_stopped_one_spec(
    broken: tuple[Path, SuiteResult],
    spec: str,
    cause: str,
    file: str,
    line: int | None,
    error_type: str,
) -> None:
    repo, _ = broken
    tools = tools_for(repo)
    v = run_jest(repo, [spec], None, bwrap_runner(repo, tools), tools).validation
    assert not v.loaded
    assert v.problem is not None
    assert (v.problem.tool, v.problem.cause, v.problem.error_type) == ("jest", cause, error_type)
    assert (v.problem.file, v.problem.line) == (file, line)
    if cause == "environment":
        assert v.problem.hint is not None and "left-pad-not-installed" in v.problem.hint


def test_excluding_what_does_not_load(broken: tuple[Path, SuiteResult]) -> None:
    repo, result = broken
    tools = tools_for(repo)
    again = run_jest(
        repo, [], None, bwrap_runner(repo, tools), tools, exclude=sorted(result.load_errors)
    )
    v = again.validation
    assert v.loaded, v.load_error
    assert sorted(e.status for e in v.examples) == ["failed", "passed"]
    assert again.files["src/calc.ts"].covered_lines == again.files["src/calc.ts"].executable_lines


def test_no_tests_found_is_not_a_run(tmp_path: Path) -> None:
    repo = write_project(tmp_path / "p", {"src/a.ts": "export const a = 1;\n"})
    tools = tools_for(repo)
    v = run_jest(repo, ["src/a.ts"], None, bwrap_runner(repo, tools), tools).validation
    assert not v.loaded and not v.passed
    assert v.problem is not None and v.problem.message == "jest found no tests"


def test_the_project_configuration_is_used(tmp_path: Path) -> None:
    # A project that configures Jest itself (ts-jest preset, its own testMatch) and has no
    # node_modules: its configuration runs; the preset resolves from Autopilot's tools.
    package = {
        "name": "own",
        "jest": {"preset": "ts-jest", "testMatch": ["**/checks/*.check.ts"]},
    }
    repo = write_project(
        tmp_path / "p",
        {
            "package.json": json.dumps(package),
            "src/one.ts": "export const one = (): number => 1;\n",
            "checks/one.check.ts": (
                'import { one } from "../src/one";\n'
                "declare const test: (n: string, f: () => void) => void;\n"
                "declare const expect: (v: unknown) => { toBe(v: unknown): void };\n"
                'test("one", () => expect(one()).toBe(1));\n'
            ),
            "src/one.test.ts": 'test("never collected", () => { throw new Error("no"); });\n',
        },
    )
    tools = tools_for(repo)
    result = run_jest(repo, [], None, bwrap_runner(repo, tools), tools)
    v = result.validation
    assert v.passed, v.load_error
    assert [e.file for e in v.examples] == ["checks/one.check.ts"]
    assert result.prepared == ["jest configuration: the project's package.json"]


def test_a_hanging_test_is_stopped(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "p",
        {"src/spin.test.js": 'test("spins", () => { for (;;) {} });\n'},
    )
    tools = tools_for(repo)
    v = run_jest(
        repo, ["src/spin.test.js"], None, bwrap_runner(repo, tools), tools, timeout_s=20
    ).validation
    assert not v.loaded and not v.passed
    assert v.reason is not None and "timeout" in v.reason
    assert v.problem is not None and v.problem.cause == "environment"


def test_missing_tools_say_how_to_install_them(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"lacks jest, ts-jest, .*run `make setup`"):
        resolve_tools(tmp_path, home=tmp_path / "nowhere")


def test_declared_node_modules_must_stay_inside(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"must be a path inside the repository"):
        resolve_tools(tmp_path, declared="../elsewhere/node_modules")
    with pytest.raises(ToolchainError, match=r"no such directory"):
        resolve_tools(tmp_path, declared="web/node_modules")
