"""The generation loop on one file of examples/node_orders, driven by hand through the node-jest
toolchain's parts (the flows join once the toolchain is registered): a first draft that does
not compile is reported with the compiler's message, the next draft passes, ESLint --fix tidies
it and the run re-proves it, its coverage of the target is complete and the rubric is clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.toolchains.node.lint import lint
from tasks.toolchains.node.rubric import analyse
from tasks.toolchains.node.run import map_project, run_jest
from tests.examples_repo import make_example_repo
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for

pytestmark = pytest.mark.slow

DRAFT = """import { addBusinessDays, isoDay } from "./dates";

describe("addBusinessDays", () => {
  it("skips the weekend", () => {
    const friday: string = new Date("2024-03-08T00:00:00Z");
    expect(isoDay(addBusinessDays(new Date(friday), 1))).toBe("2024-03-11");
  });
});
"""

FIXED = """import { addBusinessDays, isBusinessDay, isoDay } from "./dates";

let friday = new Date("2024-03-08T00:00:00Z");

describe("addBusinessDays", () => {
  it("skips the weekend", () => {
    expect(isoDay(addBusinessDays(friday, 1))).toBe("2024-03-11");
  });

  it("adds nothing for zero days", () => {
    expect(isoDay(addBusinessDays(friday, 0))).toBe("2024-03-08");
  });

  it("rejects negative days", () => {
    expect(() => addBusinessDays(friday, -1)).toThrow(
      "days must be a non-negative integer, got -1",
    );
  });
});

describe("isBusinessDay", () => {
  it("is false on Sunday", () => {
    expect(isBusinessDay(new Date("2024-03-10T00:00:00Z"))).toBe(false);
  });
});
"""


def test_a_draft_that_does_not_compile_then_a_fixed_one(tmp_path: Path) -> None:
    repo = make_example_repo("node_orders", tmp_path / "orders")
    source = "src/util/dates.ts"
    mapped = next(m for m in map_project(repo).files if m.source == source)
    spec = mapped.expected_test
    assert (spec, mapped.tests) == ("src/util/dates.test.ts", [])
    tools = tools_for(repo)
    runner = bwrap_runner(repo, tools)

    (repo / spec).write_text(DRAFT)
    first = run_jest(repo, [spec], source, runner, tools).validation
    assert not first.loaded and not first.passed
    assert first.problem is not None and first.problem.cause == "project"
    assert (first.problem.file, first.problem.line) == (spec, 5)
    assert first.load_error is not None
    assert "TS2322: Type 'Date' is not assignable to type 'string'" in first.load_error

    (repo / spec).write_text(FIXED)
    offences = lint(repo, [spec], True, runner, tools)
    assert offences == []
    assert "const friday" in (repo / spec).read_text()  # prefer-const, fixed by --fix
    second = run_jest(repo, [spec], source, runner, tools).validation
    assert second.passed, second.load_error
    assert len(second.examples) == 4
    assert second.coverage is not None
    assert second.coverage.uncovered_lines == []
    assert second.coverage.ratio == 1.0
    findings, tests = analyse(spec, (repo / spec).read_text(), source)
    assert findings == [] and tests == 4
