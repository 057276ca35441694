"""Report dialects: real pytest and rspec output produced at test time, plus documented fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.core.types import TestCaseResult
from tasks.facts.reports.read import parse_report, parse_reports
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "reports"

PYTEST_SUITE = """
import pytest

def helper(x):
    return 1 / x

def test_ok():
    assert 1 + 1 == 2

def test_fail():
    assert [1, 2] == [1, 3], "lists differ"

def test_div():
    helper(0)

@pytest.fixture
def broken():
    raise RuntimeError("setup boom")

def test_err(broken):
    pass

@pytest.mark.skip(reason="later")
def test_skip():
    pass

@pytest.mark.parametrize("v", [1, 2])
def test_p(v):
    print("captured", v)
    assert v == 1
"""

SPEC = """require_relative "../lib/calc"

RSpec.describe Calc do
  describe "#add" do
    it "adds" do
      expect(Calc.new.add(1, 2)).to eq(3)
    end

    it "fails" do
      expect(Calc.new.add(1, 2)).to eq(4)
    end
  end

  it "divides by zero" do
    Calc.new.div(1, 0)
  end

  it "is pending" do
    pending("not yet")
    raise "x"
  end
end
"""


def by_name(cases: list[TestCaseResult]) -> dict[str, TestCaseResult]:
    return {c.name: c for c in cases}


@pytest.fixture(scope="module")
def pytest_reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    repo = tmp_path_factory.mktemp("pyrepo")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_sample.py").write_text(PYTEST_SUITE)
    out = []
    for family in ("xunit1", "xunit2"):
        report = repo / f"{family}.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
             f"--junitxml={report}", "-o", f"junit_family={family}",
             "-o", "junit_logging=system-out"],
            cwd=repo, capture_output=True, check=False, timeout=120,
        )  # fmt: skip
        assert report.exists()
        out.append(report)
    return repo, out[0], out[1]


@pytest.mark.slow
def test_real_pytest_xunit1(pytest_reports: tuple[Path, Path, Path]) -> None:
    repo, xunit1, _ = pytest_reports
    cases = by_name(parse_report(xunit1, repo))
    assert len(cases) == 7
    assert {n: c.status for n, c in cases.items()} == {
        "test_ok": "passed",
        "test_fail": "failed",
        "test_div": "failed",
        "test_err": "error",
        "test_skip": "skipped",
        "test_p[1]": "passed",
        "test_p[2]": "failed",
    }
    ok = cases["test_ok"]
    # pytest writes the 0-based line of the def; we report the real 1-based line.
    source = (repo / "tests" / "test_sample.py").read_text().splitlines()
    assert ok.file == "tests/test_sample.py"
    assert ok.line is not None and source[ok.line - 1].startswith("def test_ok")
    assert ok.id == f"tests/test_sample.py:{ok.line}::test_ok"
    assert cases["test_p[1]"].id != cases["test_p[2]"].id
    assert cases["test_p[2]"].id.endswith("[2]")
    div = cases["test_div"]
    assert div.error_type == "ZeroDivisionError"
    assert div.message == "ZeroDivisionError: division by zero"
    assert [(loc.path, loc.line) for loc in div.locations][-1] == ("tests/test_sample.py", 5)
    assert cases["test_fail"].error_type == "AssertionError"
    assert cases["test_err"].error_type == "RuntimeError"
    assert "setup boom" in (cases["test_err"].message or "")
    assert cases["test_skip"].message == "later"
    assert "captured 2" in (cases["test_p[2]"].stdout or "")


@pytest.mark.slow
def test_real_pytest_xunit2_has_no_file_but_ids_from_classname(
    pytest_reports: tuple[Path, Path, Path],
) -> None:
    repo, _, xunit2 = pytest_reports
    cases = by_name(parse_report(xunit2, repo))
    assert cases["test_ok"].file is None
    assert cases["test_ok"].id == "tests.test_sample::test_ok"
    assert cases["test_div"].locations[-1].path == "tests/test_sample.py"
    assert sum(c.status == "failed" for c in cases.values()) == 3


@pytest.fixture(scope="module")
def rspec_reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    repo = tmp_path_factory.mktemp("rbrepo")
    (repo / "lib").mkdir()
    (repo / "spec").mkdir()
    (repo / "lib" / "calc.rb").write_text(
        "class Calc\n  def add(a, b)\n    a + b\n  end\n\n  def div(a, b)\n    a / b\n  end\nend\n"
    )
    (repo / "spec" / "calc_spec.rb").write_text(SPEC)
    subprocess.run(
        ["rspec", "--format", "json", "--out", "r.json", "--require", "rspec_junit_formatter",
         "--format", "RspecJunitFormatter", "--out", "r.xml"],
        cwd=repo, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    return repo, repo / "r.json", repo / "r.xml"


@pytest.mark.slow
def test_real_rspec_json(rspec_reports: tuple[Path, Path, Path]) -> None:
    repo, report, _ = rspec_reports
    cases = by_name(parse_report(report, repo))
    assert set(cases) == {
        "Calc#add adds",
        "Calc#add fails",
        "Calc divides by zero",
        "Calc is pending",
    }
    adds = cases["Calc#add adds"]
    assert adds.id == "spec/calc_spec.rb[1:1:1]"
    assert (adds.file, adds.line, adds.status, adds.classname) == (
        "spec/calc_spec.rb",
        5,
        "passed",
        "Calc#add",
    )
    div = cases["Calc divides by zero"]
    assert (div.status, div.error_type, div.message) == (
        "failed",
        "ZeroDivisionError",
        "divided by 0",
    )
    in_repo = [(loc.path, loc.line) for loc in div.locations if not loc.path.startswith("/")]
    assert in_repo == [("spec/calc_spec.rb", 15), ("lib/calc.rb", 7)]
    assert cases["Calc#add fails"].error_type == "RSpec::Expectations::ExpectationNotMetError"
    assert cases["Calc is pending"].status == "skipped"
    assert cases["Calc is pending"].message == "not yet"


@pytest.mark.slow
def test_real_rspec_junit_formatter(rspec_reports: tuple[Path, Path, Path]) -> None:
    repo, _, report = rspec_reports
    cases = by_name(parse_report(report, repo))
    div = cases["Calc divides by zero"]
    assert div.file == "spec/calc_spec.rb"
    assert div.id == "spec/calc_spec.rb::Calc divides by zero"
    assert div.error_type == "ZeroDivisionError"
    assert [(loc.path, loc.line) for loc in div.locations] == [
        ("spec/calc_spec.rb", 15),
        ("lib/calc.rb", 7),
    ]
    assert sorted(c.status for c in cases.values()) == ["failed", "failed", "passed", "skipped"]


@pytest.mark.slow
def test_real_rspec_load_error_becomes_an_error_case(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "bad_spec.rb").write_text(
        'RSpec.describe "x" do\n  it "y" do\n    expect(1).to eq(1\n  end\nend\n'
    )
    subprocess.run(
        ["rspec", "--format", "json", "--out", "r.json"],
        cwd=tmp_path, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    (case,) = parse_report(tmp_path / "r.json", tmp_path)
    assert (case.status, case.id, case.file, case.error_type) == (
        "error",
        "spec/bad_spec.rb",
        "spec/bad_spec.rb",
        "SyntaxError",
    )
    assert "syntax error" in (case.message or "")
    assert ("spec/bad_spec.rb", 4) in [(loc.path, loc.line) for loc in case.locations]


def test_surefire() -> None:
    cases = by_name(parse_report(FIXTURES / "surefire.xml"))
    assert {n: c.status for n, c in cases.items()} == {
        "addsItem": "passed",
        "totalIncludesTax": "failed",
        "removesItem": "error",
        "discounts": "skipped",
        "flakyCheckout": "passed",  # passed on rerun: the flaky attempt does not count
    }
    total = cases["totalIncludesTax"]
    assert total.id == "com.example.shop.CartTest::totalIncludesTax"
    assert total.message == "expected: <107> but was: <100>"
    assert total.error_type == "org.opentest4j.AssertionFailedError"
    assert [(loc.path, loc.line) for loc in total.locations] == [
        ("java/lang/reflect/Method.java", 568),
        ("com/example/shop/CartTest.java", 31),
        ("org/junit/jupiter/api/AssertEquals.java", 150),
        ("org/junit/jupiter/api/AssertionUtils.java", 55),
    ]
    assert total.stdout == "computing total for cart 42\n"
    removes = cases["removesItem"]
    assert [(loc.path, loc.line) for loc in removes.locations] == [
        ("com/example/shop/CartTest.java", 40),
        ("com/example/shop/Cart.java", 27),
        ("java/util/ArrayList.java", 504),
        ("jdk/internal/util/Preconditions.java", 100),
    ]
    assert removes.stderr == "WARN cart empty\n"
    assert cases["discounts"].message == "not implemented yet"
    assert cases["flakyCheckout"].stdout is None


def test_gradle() -> None:
    cases = by_name(parse_report(FIXTURES / "gradle.xml"))
    divides = cases["divides()"]
    assert divides.status == "failed"
    assert [(loc.path, loc.line) for loc in divides.locations] == [
        ("org/acme/CalculatorTest.kt", 18),
        ("org/junit/jupiter/api/AssertEquals.java", 197),
        ("org/junit/jupiter/api/AssertionFailureBuilder.java", 151),
    ]
    assert cases["roots()"].status == "skipped"
    assert cases["adds()"].stdout is None  # suite-level output is not a case's output


def test_jest_junit(tmp_path: Path) -> None:
    cases = by_name(parse_report(FIXTURES / "jest-junit.xml", Path("/home/ci/app")))
    tax = cases["Cart total includes tax"]
    assert (tax.status, tax.file) == ("failed", "src/cart.test.js")
    assert tax.message == "Error: expect(received).toBe(expected) // Object.is equality"
    assert tax.error_type == "Error"
    assert tax.locations[-1].path == "src/cart.test.js"
    assert tax.locations[-1].line == 12
    assert cases["Cart discounts"].status == "skipped"


def test_go_junit_report() -> None:
    cases = by_name(parse_report(FIXTURES / "go-junit-report.xml"))
    total = cases["TestTotal"]
    assert total.id == "example.com/shop/cart::TestTotal"
    assert (total.status, total.message) == ("failed", "Failed")
    assert [(loc.path, loc.line) for loc in total.locations] == [("cart_test.go", 21)]
    assert cases["TestDiscount"].status == "skipped"


def test_ant() -> None:
    run = parse_reports([FIXTURES / "ant.xml"])
    assert (run.summary.tests, run.summary.failed, run.summary.errors) == (3, 1, 1)
    cases = by_name(run.cases)
    assert cases["testNull"].error_type == "java.lang.NullPointerException"
    assert [(loc.path, loc.line) for loc in cases["testNull"].locations] == [
        ("com/acme/ParserTest.java", 51),
        ("com/acme/Parser.java", 12),
    ]


def test_nested_suites_inherit_file_and_keep_order() -> None:
    cases = parse_report(FIXTURES / "nested.xml")
    assert [(c.name, c.status, c.file) for c in cases] == [
        ("top", "passed", "spec/outer_spec.rb"),
        ("deep", "skipped", "spec/inner_spec.rb"),
        ("middle", "error", "spec/outer_spec.rb"),
        ("after", "passed", "spec/outer_spec.rb"),
    ]
    middle = cases[2]
    assert middle.error_type == "RuntimeError"
    assert [(loc.path, loc.line) for loc in middle.locations] == [("lib/outer.rb", 3)]
    run = parse_reports([FIXTURES / "nested.xml"])
    assert run.summary.duration == 1.875


def test_parse_reports_keeps_good_files_next_to_bad(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuite><testcase name='x'>")
    run = parse_reports(
        [FIXTURES / "ant.xml", bad, tmp_path / "missing.json", FIXTURES / "gradle.xml"]
    )
    assert run.summary.tests == 6
    assert [(e.file, e.error.split(" (")[0]) for e in run.errors] == [
        (str(bad), "malformed or truncated JUnit XML"),
        (str(tmp_path / "missing.json"), "no such file"),
    ]
    dumped = json.loads(run.model_dump_json())
    assert "stdout" not in dumped["cases"][0]
