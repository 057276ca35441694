"""Repair helpers of the node-jest toolchain: syntax checks of patched files (real node and
TypeScript in the sandbox), manifest risk, and stack traces in Jest's form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.node.patches import is_test_side, risk_reason, syntax_errors
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for, write_project


@pytest.mark.slow
def test_syntax_errors_of_changed_files(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "p",
        {
            "src/ok.ts": "export const a: number = 1;\n",
            "src/typed.ts": 'export const a: number = "not a number";\n',  # types: not checked
            "src/bad.ts": "export const a: number = ;\n",
            "src/bad.tsx": "export const A = () => <div>{1}</dv>;\n",
            "src/ok.jsx": "export const A = () => <div>{1}</div>;\n",
            "src/bad.js": "module.exports = {\n",
            "src/esm.mjs": 'import fs from "fs";\nexport const x = fs;\n',
            "src/esm.js": 'import fs from "fs";\nexport const y = fs;\n',
            "src/bad.cjs": "const = 1;\n",
            "README.md": "not code (\n",
        },
    )
    tools = tools_for(repo)
    files = [
        "src/ok.ts",
        "src/typed.ts",
        "src/bad.ts",
        "src/bad.tsx",
        "src/ok.jsx",
        "src/bad.js",
        "src/esm.mjs",
        "src/esm.js",
        "src/bad.cjs",
        "README.md",
        "src/deleted.ts",
    ]
    errors = syntax_errors(repo, files, bwrap_runner(repo, tools), tools)
    by_file = {e.split(":", 1)[0]: e for e in errors}
    assert sorted(by_file) == ["src/bad.cjs", "src/bad.js", "src/bad.ts", "src/bad.tsx"]
    assert (
        by_file["src/bad.ts"]
        == "src/bad.ts: syntax error: line 1: error TS1109: Expression expected."
    )
    assert "TS17002" in by_file["src/bad.tsx"] and "'div'" in by_file["src/bad.tsx"]
    assert "SyntaxError: Unexpected end of input" in by_file["src/bad.js"]
    assert "SyntaxError" in by_file["src/bad.cjs"] and "(line 1)" in by_file["src/bad.cjs"]
    assert all("\n" not in e for e in errors)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("package.json", "package.json: dependency manifest or lock file"),
        ("web/package-lock.json", "web/package-lock.json: dependency manifest or lock file"),
        ("yarn.lock", "yarn.lock: dependency manifest or lock file"),
        ("pnpm-lock.yaml", "pnpm-lock.yaml: dependency manifest or lock file"),
        (".npmrc", ".npmrc: dependency manifest or lock file"),
        ("jest.config.ts", "jest.config.ts: test, compiler or lint configuration"),
        ("jest.config.js", "jest.config.js: test, compiler or lint configuration"),
        ("tsconfig.json", "tsconfig.json: test, compiler or lint configuration"),
        ("tsconfig.build.json", "tsconfig.build.json: test, compiler or lint configuration"),
        ("babel.config.js", "babel.config.js: test, compiler or lint configuration"),
        ("eslint.config.mjs", "eslint.config.mjs: test, compiler or lint configuration"),
        ("src/setupTests.ts", "src/setupTests.ts: test, compiler or lint configuration"),
        ("src/orders.ts", None),
        ("src/orders.test.ts", None),
        ("src/package.ts", None),
    ],
)
def test_risk(path: str, reason: str | None) -> None:
    assert risk_reason(path) == reason


@pytest.mark.parametrize(
    ("path", "test_side"),
    [
        ("src/a.test.ts", True),
        ("src/__tests__/a.ts", True),
        ("src/__mocks__/api.ts", True),
        ("src/__snapshots__/a.test.ts.snap", True),
        ("test/helpers.ts", True),
        ("src/a.ts", False),
        ("src/testing.ts", False),
    ],
)
def test_test_side(path: str, test_side: bool) -> None:
    assert is_test_side(path) is test_side


# What jest-junit writes for a failing example (the trace Jest prints, paths absolute).
JEST_TRACE = """Error: expect(received).toBe(expected) // Object.is equality

Expected: 5
Received: 4
    at toBe (/work/repo/src/calc.ts:3:11)
    at Object.<anonymous> (/work/repo/src/calc.test.ts:8:21)
    at Promise.then.completed (/opt/tools/node_modules/jest-circus/build/utils.js:298:28)
    at new Promise (<anonymous>)
    at processTicksAndRejections (node:internal/process/task_queues:95:5)
    at /work/repo/src/helpers/run.js:7:3"""


def test_jest_frames_give_source_locations_innermost_last() -> None:
    locations = locations_from_trace(JEST_TRACE, Path("/work/repo"))
    pairs = [(loc.path, loc.line) for loc in locations]
    assert pairs == [
        ("src/helpers/run.js", 7),
        ("/opt/tools/node_modules/jest-circus/build/utils.js", 298),
        ("src/calc.test.ts", 8),
        ("src/calc.ts", 3),
    ]
