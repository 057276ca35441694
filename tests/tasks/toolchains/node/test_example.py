"""examples/node_orders as the node-jest toolchain sees it: half tested, one weak spec, kinds of
every sort, lint clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.toolchains.node.layout import NodeKind
from tasks.toolchains.node.lint import lint
from tasks.toolchains.node.rubric import analyse
from tasks.toolchains.node.run import map_project
from tests.examples_repo import EXAMPLES, make_example_repo
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for

ORDERS = EXAMPLES / "node_orders"


def test_the_example_is_half_tested_with_every_kind() -> None:
    mapping = map_project(ORDERS)
    kinds = {m.source: m.kind for m in mapping.files}
    assert kinds == {
        "src/orders.ts": NodeKind.MODULE,
        "src/discounts.ts": NodeKind.MODULE,
        "src/util/money.ts": NodeKind.UTILITY,
        "src/util/dates.ts": NodeKind.UTILITY,
        "src/handlers/orders.ts": NodeKind.ROUTE,
        "src/server.ts": NodeKind.ROUTE,
        "src/components/orderSummary.ts": NodeKind.COMPONENT,
        "src/components/statusBadge.ts": NodeKind.COMPONENT,
    }
    assert sorted(mapping.untested) == [
        "src/components/statusBadge.ts",
        "src/discounts.ts",
        "src/server.ts",
        "src/util/dates.ts",
    ]
    expected = {m.source: m.expected_test for m in mapping.files}
    assert expected["src/util/dates.ts"] == "src/util/dates.test.ts"
    assert mapping.warnings == []


def test_one_spec_is_weak_and_the_others_are_not() -> None:
    verdicts = {}
    for test in sorted(ORDERS.rglob("*.test.ts")):
        rel = test.relative_to(ORDERS).as_posix()
        verdicts[rel] = [f.rule for f in analyse(rel, test.read_text())[0]]
    assert verdicts == {
        "src/components/orderSummary.test.ts": ["vague-matcher"],
        "src/handlers/orders.test.ts": [],
        "src/orders.test.ts": [],
        "src/util/money.test.ts": [],
    }


@pytest.mark.slow
def test_the_example_is_eslint_clean(tmp_path: Path) -> None:
    repo = make_example_repo("node_orders", tmp_path / "orders")
    tools = tools_for(repo)
    files = sorted(p.relative_to(repo).as_posix() for p in (repo / "src").rglob("*.ts"))
    assert len(files) == 12
    assert lint(repo, files, False, bwrap_runner(repo, tools), tools) == []
