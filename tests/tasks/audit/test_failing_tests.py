"""The audit names every failing test, and a source is failing only through its own tests.

The end-to-end tests audit projects written for them with the real tools (pytest and
coverage.py, rspec and SimpleCov, in the bwrap sandbox) through the CLI, in JSON and as the
printed table: one test fails and its test file runs the bodies of eight sources, so exactly one
source may be failing. The unit tests hold the three attribution rules to measured-looking
inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flows.commands.audit import _print_table
from tasks.audit.failing import message_head
from tasks.audit.report import FAILING_SHOWN, AuditReport, build_report, markdown_summary
from tasks.core.types import Location, MappedFile, Mapping, TestCaseResult, ValidationResult
from tests.examples_repo import git
from tests.field_repos import make_repo, write_tree

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))
PARTS = ("catalog", "discount", "inventory", "money", "receipt", "shipping", "tax")

# --- the Python project --------------------------------------------------------------------

PY_PART = "def {name}_value(x):\n    y = x + 1\n    return y - 1\n"
PY_CART = (
    "".join(f"from shop.{p} import {p}_value\n" for p in PARTS)
    + "\n\ndef total(n):\n"
    + "    parts = ["
    + ", ".join(f"{p}_value(n)" for p in PARTS)
    + "]\n"
    + "    return sum(parts) + 1  # the regression: + 1\n\n\n"
    + "def count(n):\n    return n\n"
)
PY_TEST_CART = (
    "from shop.cart import count, total\n\n\n"
    "def test_total():\n    assert total(2) == 14\n\n\n"
    "def test_count():\n    assert count(3) == 3\n"
)
PY_FILES = {
    "pyproject.toml": '[project]\nname = "shop"\nversion = "0.1.0"\n\n'
    '[tool.pytest.ini_options]\npythonpath = ["src"]\ntestpaths = ["tests"]\n\n'
    '[tool.coverage.run]\nsource = ["shop"]\n',
    "src/shop/__init__.py": "",
    "src/shop/cart.py": PY_CART,
    "tests/test_cart.py": PY_TEST_CART,
    **{f"src/shop/{p}.py": PY_PART.format(name=p) for p in PARTS},
}
#: The second commit: the cart is fixed, and a test file named after no source fails inside
#: shipping.py (a ZeroDivisionError raised there).
PY_SHIP = (
    PY_PART.format(name="shipping")
    + "\n\ndef per_parcel(total, parcels):\n    return total // parcels\n"
)
PY_TEST_FLOWS = (
    "from shop.cart import total\nfrom shop.shipping import per_parcel\n\n\n"
    "def test_an_empty_order_ships_free():\n    assert per_parcel(total(0), 0) == 0\n"
)

# --- the Ruby project ----------------------------------------------------------------------

RB_PART = "module {mod}\n  def self.value(x)\n    y = x + 1\n    y - 1\n  end\nend\n"
RB_CART = (
    "".join(f'require_relative "{p}"\n' for p in PARTS)
    + "\nmodule Cart\n"
    + "  PARTS = ["
    + ", ".join(p.capitalize() for p in PARTS)
    + "].freeze\n\n"
    + "  def self.total(n)\n    PARTS.sum { |part| part.value(n) } + 1 # the regression\n  end\n\n"
    + "  def self.count(n)\n    n\n  end\nend\n"
)
RB_SPEC_CART = (
    'require_relative "../lib/cart"\n\nRSpec.describe Cart do\n'
    '  it "totals every part" do\n    expect(Cart.total(2)).to eq(14)\n  end\n\n'
    '  it "counts" do\n    expect(Cart.count(3)).to eq(3)\n  end\nend\n'
)
RB_FILES = {
    "Gemfile": 'source "https://rubygems.org"\n\ngem "rspec"\ngem "simplecov"\n',
    "lib/cart.rb": RB_CART,
    "spec/cart_spec.rb": RB_SPEC_CART,
    **{f"lib/{p}.rb": RB_PART.format(mod=p.capitalize()) for p in PARTS},
}
RB_SHIP = RB_PART.format(mod="Shipping").replace(
    "  end\nend\n",
    "  end\n\n  def self.per_parcel(total, parcels)\n    total / parcels\n  end\nend\n",
)
RB_SPEC_FLOWS = (
    'require_relative "../lib/cart"\n\nRSpec.describe "an empty order" do\n'
    '  it "ships free" do\n    expect(Shipping.per_parcel(Cart.total(0), 0)).to eq(0)\n  end\nend\n'
)

# --- the JavaScript project (Jest) ---------------------------------------------------------

JS_PART = (
    "function value(x) {\n  const y = x + 1;\n  return y - 1;\n}\n\nmodule.exports = { value };\n"
)
JS_CART = (
    "const parts = [" + ", ".join(f'require("./{p}")' for p in PARTS) + "];\n\n"
    "function total(n) {\n"
    "  return parts.reduce((sum, part) => sum + part.value(n), 0) + 1; // the regression\n"
    "}\n\nmodule.exports = { total };\n"
)
JS_TEST_CART = (
    'const { total } = require("./cart");\n\n'
    'test("totals every part", () => {\n  expect(total(2)).toBe(14);\n});\n'
)
JS_FILES = {
    "package.json": '{"name": "shop", "version": "1.0.0", "private": true}\n',
    "src/cart.js": JS_CART,
    "src/cart.test.js": JS_TEST_CART,
    **{f"src/{p}.js": JS_PART for p in PARTS},
}
JS_SHIP = JS_PART.replace("module.exports = { value };", "").rstrip() + (
    "\n\nfunction perParcel(total, parcels) {\n"
    '  if (parcels === 0) throw new Error("no parcels");\n'
    "  return total / parcels;\n}\n\nmodule.exports = { value, perParcel };\n"
)
JS_TEST_FLOWS = (
    'const { total } = require("./cart");\nconst { perParcel } = require("./shipping");\n\n'
    'test("an empty order ships free", () => {\n  expect(perParcel(total(0), 0)).toBe(0);\n});\n'
)


def _node_project(root: Path) -> Path:
    repo = make_repo(root, JS_FILES, "shop: the cart adds one too many")
    write_tree(
        repo,
        {
            "src/cart.js": JS_CART.replace(" + 1; // the regression", ";"),
            "src/shipping.js": JS_SHIP,
            "src/flows.test.js": JS_TEST_FLOWS,
        },
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "shop: cart fixed, shipping per parcel")
    return repo


def _python_project(root: Path) -> Path:
    repo = make_repo(root, PY_FILES, "shop: the cart adds one too many")
    cart = repo / "src/shop/cart.py"
    write_tree(
        repo,
        {
            "src/shop/cart.py": cart.read_text().replace(" + 1  # the regression: + 1", ""),
            "src/shop/shipping.py": PY_SHIP,
            "tests/test_flows.py": PY_TEST_FLOWS,
        },
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "shop: cart fixed, shipping per parcel")
    return repo


def _ruby_project(root: Path) -> Path:
    root.mkdir(parents=True)
    write_tree(root, RB_FILES)
    subprocess.run(["bundle", "lock", "--local"], cwd=root, check=True, capture_output=True)
    repo = make_repo(root, {}, "shop: the cart adds one too many")
    write_tree(
        repo,
        {
            "lib/cart.rb": RB_CART.replace(" + 1 # the regression", ""),
            "lib/shipping.rb": RB_SHIP,
            "spec/flows_spec.rb": RB_SPEC_FLOWS,
        },
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "shop: cart fixed, shipping per parcel")
    return repo


def _audit(repo: Path, ref: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [AUTOPILOT, "audit", "--repo", str(repo), "--ref", ref, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _json(repo: Path, ref: str) -> dict[str, Any]:
    done = _audit(repo, ref, "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {f["source"]: f["status"] for f in doc["files"]}


STACKS = {
    "jest": {
        "make": _node_project,
        "cart": "src/cart.js",
        "shipping": "src/shipping.js",
        "id": "src/cart.test.js:: totals every part",
        "message": "Error: expect(received).toBe(expected)",
        "location": "src/cart.test.js:4",
        "flows_id": "src/flows.test.js:: an empty order ships free",
        "flows_message": "no parcels",
        "flows_location": "src/shipping.js:7",
        # Its mapping gives a test named after a feature the sources it imports.
        "flows_rule": "mapping",
    },
    "pytest": {
        "make": _python_project,
        "cart": "src/shop/cart.py",
        "shipping": "src/shop/shipping.py",
        "id": "tests/test_cart.py::test_total",
        "message": "assert 15 == 14",
        "location": "tests/test_cart.py:5",
        "flows_id": "tests/test_flows.py::test_an_empty_order_ships_free",
        "flows_message": "ZeroDivisionError",
        "flows_location": "src/shop/shipping.py:7",
        "flows_rule": "trace",
    },
    "rspec": {
        "make": _ruby_project,
        "cart": "lib/cart.rb",
        "shipping": "lib/shipping.rb",
        "id": "./spec/cart_spec.rb[1:1]",
        "message": "expected: 14 got: 15",
        "location": "spec/cart_spec.rb:5",
        "flows_id": "./spec/flows_spec.rb[1:1]",
        "flows_message": "divided by 0",
        "flows_location": "lib/shipping.rb:8",
        "flows_rule": "trace",
    },
}


@pytest.fixture(scope="module", params=sorted(STACKS))
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    stack = STACKS[request.param]
    return stack, stack["make"](tmp_path_factory.mktemp(request.param) / "shop")


@pytest.mark.slow
def test_one_failing_test_makes_one_source_failing_and_is_named(project: Any) -> None:
    stack, repo = project
    doc = _json(repo, "HEAD~1")
    statuses = _statuses(doc)
    assert len(statuses) == 8
    # Its test file ran every source's function bodies, and they stay tested.
    assert all(f["covered_by"] or f["specs"] for f in doc["files"])
    assert {statuses[s] for s in statuses if s != stack["cart"]} == {"tested"}
    assert [s for s, status in statuses.items() if status == "failing"] == [stack["cart"]]
    assert "failing" not in {statuses[s] for s in statuses if s != stack["cart"]}
    assert doc["summary"]["tests"]["failed"] == 1
    [failing] = doc["failing_tests"]
    assert failing["id"] == stack["id"]
    assert failing["message"].startswith(stack["message"])
    assert failing["location"] == stack["location"]
    assert failing["sources"] == [stack["cart"]] and failing["attributed_by"] == "mapping"
    by = {f["source"]: f for f in doc["files"]}
    assert by[stack["cart"]]["failing_tests"] == [stack["id"]]

    table = _audit(repo, "HEAD~1")
    assert table.returncode == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if line.startswith(stack["id"])]
    assert stack["location"] in row and stack["message"] in row and stack["cart"] in row
    rows = [line.split() for line in table.stdout.splitlines()]
    rows = [row for row in rows if row and row[0] in statuses]
    assert len(rows) == 8
    assert [row[0] for row in rows if row[2] == "failing"] == [stack["cart"]]


@pytest.mark.slow
def test_a_test_file_named_after_no_source_fails_the_source_its_trace_was_raised_in(
    project: Any,
) -> None:
    stack, repo = project
    doc = _json(repo, "HEAD")
    [failing] = doc["failing_tests"]
    assert failing["id"] == stack["flows_id"]
    assert stack["flows_message"] in failing["message"]
    assert failing["location"] == stack["flows_location"]
    assert failing["sources"] == [stack["shipping"]]
    assert failing["attributed_by"] == stack["flows_rule"]
    statuses = _statuses(doc)
    assert [s for s, status in statuses.items() if status == "failing"] == [stack["shipping"]]


# --- the rules, on measured-looking inputs -------------------------------------------------


def _case(test_file: str, name: str, status: str, **kw: Any) -> TestCaseResult:
    return TestCaseResult(id=f"{test_file}::{name}", name=name, file=test_file, status=status, **kw)  # type: ignore[arg-type]


def _report(
    cases: list[TestCaseResult],
    runs: dict[str, dict[str, int]],
    also: dict[str, list[str]] | None = None,
) -> AuditReport:
    """The report of `cases` on src/cart.py and its parts; tests/test_cart.py is mapped to the
    cart (and to what `also` says)."""
    sources = [f"src/{p}.py" for p in ("cart", *PARTS)]
    specs = {"src/cart.py": ["tests/test_cart.py"], **(also or {})}
    mapping = Mapping(
        toolchain="python-pytest",
        files=[
            MappedFile(
                source=s,
                kind="python",
                specs=specs.get(s, []),
                expected_spec=f"tests/test_{Path(s).stem}.py",
            )
            for s in sources
        ],
        untested=[],
    )
    return build_report(
        repo="r",
        commit="c" * 40,
        mapping=mapping,
        suite=ValidationResult(toolchain="python-pytest", loaded=True, examples=cases),
        coverage={},
        broken_specs={},
        lint=[],
        static={},
        tested_by={s: sorted(by_test) for s, by_test in runs.items()},
        body_lines_run=runs,
    )


def _failing(report: AuditReport) -> list[str]:
    return [f.source for f in report.files if f.status == "failing"]


#: tests/test_cart.py and tests/test_flows.py run the bodies of every source.
EVERYWHERE = {
    f"src/{p}.py": {"tests/test_cart.py": 3, "tests/test_flows.py": 2 + (p == "money") * 5}
    for p in ("cart", *PARTS)
}


def test_a_mapped_test_file_fails_only_its_source_whatever_it_ran() -> None:
    report = _report(
        [
            _case("tests/test_cart.py", "test_total", "failed", message="assert 15 == 14"),
            _case("tests/test_cart.py", "test_count", "passed"),
        ],
        EVERYWHERE,
    )
    assert _failing(report) == ["src/cart.py"]
    assert {f.status for f in report.files if f.source != "src/cart.py"} == {"tested"}
    [failing] = report.failing_tests
    assert (failing.sources, failing.attributed_by) == (["src/cart.py"], "mapping")


def test_an_unmapped_test_file_fails_the_innermost_source_of_its_trace() -> None:
    frames = [Location(path="tests/test_flows.py", line=4), Location(path="src/cart.py", line=9)]
    frames += [Location(path="src/tax.py", line=3), Location(path="/usr/lib/python3/x.py", line=1)]
    report = _report(
        [_case("tests/test_flows.py", "test_refund", "error", locations=frames)], EVERYWHERE
    )
    assert _failing(report) == ["src/tax.py"]
    [failing] = report.failing_tests
    assert failing.attributed_by == "trace"
    assert failing.location == "src/tax.py:3"  # the innermost frame inside the project


def test_a_test_file_mapped_to_several_sources_fails_the_one_its_trace_names() -> None:
    report = _report(
        [
            _case(
                "tests/test_cart.py",
                "test_tax",
                "failed",
                locations=[Location(path="src/tax.py", line=2)],
            )
        ],
        EVERYWHERE,
        also={"src/tax.py": ["tests/test_cart.py"]},
    )
    assert _failing(report) == ["src/tax.py"]
    assert report.failing_tests[0].attributed_by == "mapping"
    # No frame in any of them: every source it is mapped to.
    plain = _case("tests/test_cart.py", "test_x", "failed")
    both = _report([plain], EVERYWHERE, also={"src/tax.py": ["tests/test_cart.py"]})
    assert _failing(both) == ["src/cart.py", "src/tax.py"]


def test_without_a_source_frame_the_source_its_test_file_ran_most_is_failing() -> None:
    case = _case(
        "tests/test_flows.py",
        "test_receipt",
        "failed",
        line=7,
        locations=[Location(path="tests/test_flows.py", line=8)],
    )
    report = _report([case], EVERYWHERE)
    assert _failing(report) == ["src/money.py"]  # 7 lines run there, 2 everywhere else
    [failing] = report.failing_tests
    assert failing.attributed_by == "coverage" and failing.location == "tests/test_flows.py:8"
    # A test file that ran no source: the failure is listed, and no source is failing.
    lonely = _report([case.model_copy(update={"locations": []})], {})
    assert _failing(lonely) == [] and lonely.failing_tests[0].sources == []
    assert lonely.failing_tests[0].location == "tests/test_flows.py:7"


def test_the_message_head_is_one_bounded_line() -> None:
    rspec = "\nexpected: 14\n     got: 15\n\n(compared using ==)\n\nDiff: ..."
    head = message_head(_case("spec/a_spec.rb", "x", "failed", message=rspec))
    assert head == "expected: 14 got: 15 (compared using ==)..."
    long = message_head(_case("t.py", "x", "failed", message="x" * 500))
    assert long is not None and len(long) == 200 and long.endswith("...")
    from_trace = message_head(_case("t.py", "x", "error", trace="\n  E   KeyError: 'a'\n"))
    assert from_trace == "E KeyError: 'a'"
    assert message_head(_case("t.py", "x", "failed")) is None


def test_the_table_lists_failing_tests_capped_with_a_count_of_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cases = [
        _case("tests/test_cart.py", f"test_{n}", "failed", message=f"assert {n} == 0")
        for n in range(FAILING_SHOWN + 5)
    ]
    report = _report(cases, EVERYWHERE)
    _print_table(report)
    out = capsys.readouterr().out
    assert f"Failing tests ({FAILING_SHOWN + 5})" in out
    assert "tests/test_cart.py::test_0 " in out and "assert 0 == 0" in out
    last = FAILING_SHOWN - 1
    assert f"tests/test_cart.py::test_{last} " in out
    assert f"test_{FAILING_SHOWN} " not in out
    assert "... and 5 more failing tests (--json)" in out
    summary = markdown_summary(report)  # the Prefect artifact, likewise capped
    assert "## Failing tests" in summary and "- tests/test_cart.py::test_0 at " in summary
    assert "- ... and 5 more failing tests" in summary
