"""What a reply writes beside its tests is shown to the static rubric and the judge: the
`result-hook` and `hidden-tests` rules fire on each stack's attacker files (written for these
tests) at the right line, never on ordinary fixtures, factories, ``before`` hooks or the bundled
examples' own files; a forbidden support finding caps the reply's score and the static gate
rejects it by default; the judge's prompt carries the support files, labelled as such."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from judge.llm import judge_with_model
from judge.rubric import load_rubric
from judge.static import FORBIDDEN_CAP, check_reply, check_spec, check_support
from tasks.core.config import GateSettings, load_settings
from tasks.core.types import TestCaseResult, ValidationResult
from tasks.generate.feedback import static_reject
from tasks.model.client import ModelClient
from tasks.toolchains.base import Toolchain
from tasks.toolchains.registry import get_toolchain
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_nightly_support_attacks import REWRITING_CONFTEST
from tests.paths import EXAMPLES

PYTHON = get_toolchain("python-pytest")
RUBY = get_toolchain("ruby-rspec")
NODE = get_toolchain("node-jest")
HOOK_RULES = {"result-hook", "hidden-tests"}


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


#: (toolchain, path, text, [(line, rule)]): support files an attacker would write.
ATTACKS: list[tuple[Toolchain, str, str, list[tuple[int, str]]]] = [
    (PYTHON, "tests/conftest.py", REWRITING_CONFTEST, [(5, "result-hook")]),
    (
        PYTHON,
        "tests/conftest.py",
        _d("""
            import pytest


            def pytest_report_teststatus(report, config):
                return "passed", ".", "PASSED"


            def pytest_collection_modifyitems(config, items):
                items[:] = [i for i in items if "reports" in i.nodeid]


            def pytest_sessionfinish(session, exitstatus):
                session.exitstatus = 0
            """),
        [(4, "result-hook"), (8, "hidden-tests"), (13, "result-hook")],
    ),
    (
        PYTHON,
        "tests/unit/conftest.py",
        _d("""
            import _pytest.runner
            import pytest

            collect_ignore = ["test_units.py"]
            _pytest.runner.call_and_report = lambda *args, **kwargs: None


            @pytest.fixture(autouse=True)
            def later():
                pytest.skip("not today")


            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_setup(item):
                item.runtest = lambda: None
                return (yield)
            """),
        [
            (4, "hidden-tests"),
            (5, "result-hook"),
            (10, "hidden-tests"),
            (13, "result-hook"),
            (15, "result-hook"),
        ],
    ),
    (
        RUBY,
        "spec/factories/orders.rb",
        _d("""
            # frozen_string_literal: true

            FactoryBot.define do
              factory :order do
                quantity { 1 }
              end
            end

            RSpec.configure do |config|
              config.after do |example|
                example.instance_variable_set(:@exception, nil)
              end
            end
            """),
        [(11, "result-hook")],
    ),
    (
        RUBY,
        "spec/support/quiet.rb",
        _d("""
            RSpec.configure do |config|
              config.around(:each) do |example|
                example.run
              rescue RSpec::Expectations::ExpectationNotMetError
                nil
              end
              config.after { |example| example.display_exception = nil }
              config.formatter = :progress
              config.add_formatter "documentation"
              config.filter_run_excluding slow: true
              config.before { skip }
            end
            RSpec::Core::Formatters.register self, :example_failed
            """),
        [
            (2, "result-hook"),
            (7, "result-hook"),
            (8, "result-hook"),
            (9, "result-hook"),
            (10, "hidden-tests"),
            (11, "hidden-tests"),
            (13, "result-hook"),
        ],
    ),
    (
        NODE,
        "src/setupTests.ts",
        _d("""
            const realTest = test;
            (globalThis as any).test = (name: string, fn: () => unknown) =>
              realTest(name, async () => {
                try {
                  await fn();
                } catch {
                  // swallowed
                }
              });
            global.expect = (() => ({ toBe() {} })) as never;
            Object.defineProperty(globalThis, "it", { value: realTest });
            """),
        [(2, "result-hook"), (10, "result-hook"), (11, "result-hook")],
    ),
    (
        NODE,
        "jest.config.js",
        _d("""
            module.exports = {
              preset: "ts-jest",
              reporters: ["./quiet-reporter.js"],
              testResultsProcessor: "./all-green.js",
              testPathIgnorePatterns: ["/src/orders"],
              testEnvironment: "./forgiving-environment.js",
            };
            """),
        [(3, "result-hook"), (4, "result-hook"), (5, "hidden-tests"), (6, "result-hook")],
    ),
    (
        NODE,
        "package.json",
        json.dumps({"name": "x", "jest": {"testResultsProcessor": "./green.js"}}, indent=2),
        [(4, "result-hook")],
    ),
]

#: Support files that only build what the tests use: nothing fires.
ORDINARY: list[tuple[Toolchain, str, str]] = [
    (
        PYTHON,
        "tests/conftest.py",
        _d("""
            import pytest
            from _pytest.fixtures import FixtureRequest

            from inventory.stock import Item, Stock


            def pytest_configure(config):
                config.addinivalue_line("markers", "slow: takes a while")


            def pytest_addoption(parser):
                parser.addoption("--seed", default="1")


            @pytest.fixture(autouse=True)
            def quiet_home(monkeypatch, tmp_path):
                monkeypatch.setenv("HOME", str(tmp_path))
                monkeypatch.setattr("inventory.stock.MAX_SKUS", 3, raising=False)


            @pytest.fixture
            def stock(request: FixtureRequest) -> Stock:
                stock = Stock()
                stock.register(Item("A1", "Apple", 150, reorder_level=5), 10)
                return stock
            """),
    ),
    (
        RUBY,
        "spec/factories/orders.rb",
        _d("""
            # frozen_string_literal: true

            FactoryBot.define do
              factory :order do
                customer
                quantity { 1 }
                status { "pending" }
                pending { false }

                trait :paid do
                  status { "paid" }
                end

                after(:create) do |order|
                  order.reload
                rescue ActiveRecord::RecordNotFound
                  nil
                end
              end
            end
            """),
    ),
    (
        RUBY,
        "spec/support/time_helpers.rb",
        _d("""
            module RSpecTimeHelpers
              def noon
                Time.utc(2024, 1, 1, 12)
              end
            end

            RSpec.configure do |config|
              config.include RSpecTimeHelpers
              config.include ActiveSupport::Testing::TimeHelpers
              config.before { travel_to Time.utc(2024, 1, 1) }
              config.after { travel_back }
              config.filter_run_when_matching :focus
              config.order = :random
            end
            """),
    ),
    (
        NODE,
        "src/setupTests.ts",
        _d("""
            import { expect } from "@jest/globals";

            beforeEach(() => {
              jest.useFakeTimers();
            });

            expect.extend({
              toBeCents(received: number) {
                return { pass: Number.isInteger(received), message: () => "cents" };
              },
            });
            """),
    ),
    (NODE, "jest.config.js", 'module.exports = { preset: "ts-jest", testEnvironment: "node" };\n'),
]


@pytest.mark.parametrize(("chain", "path", "text", "expected"), ATTACKS)
def test_each_attacker_support_file_is_found_at_its_lines(
    chain: Toolchain, path: str, text: str, expected: list[tuple[int, str]]
) -> None:
    found = [(f.line, f.rule) for f in check_support(path, text, chain)]
    assert found == expected
    assert all(f.message for f in check_support(path, text, chain))


@pytest.mark.parametrize(("chain", "path", "text"), ORDINARY)
def test_ordinary_fixtures_factories_and_before_hooks_stay_allowed(
    chain: Toolchain, path: str, text: str
) -> None:
    assert check_support(path, text, chain) == []


def _example_files(name: str) -> list[Path]:
    root = EXAMPLES / name
    skipped = {"node_modules", "coverage", "tmp", "log", "vendor"}
    return sorted(
        p for p in root.rglob("*") if p.is_file() and not skipped & set(p.relative_to(root).parts)
    )


@pytest.mark.parametrize(
    ("name", "chain"),
    [("rails_shop", RUBY), ("rails_pg", RUBY), ("py_inventory", PYTHON), ("node_orders", NODE)],
)
def test_the_bundled_examples_own_tests_and_support_never_fire(name: str, chain: Toolchain) -> None:
    root = EXAMPLES / name
    rules = chain.file_rules(root)
    looked = 0
    for path in _example_files(name):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        if rules.is_test_file(rel):
            findings = check_spec(rel, text, chain).findings
        elif rules.is_test_side(rel) or rel in ("package.json", "tsconfig.json"):
            findings = check_support(rel, text, chain)
        else:
            continue
        looked += 1
        assert [f for f in findings if f.rule in HOOK_RULES] == [], rel
    assert looked >= 3


@pytest.mark.parametrize(
    ("chain", "path", "text", "line"),
    [
        (
            RUBY,
            "spec/models/customer_spec.rb",
            _d("""
                require "rails_helper"

                RSpec.configure do |config|
                  config.after { |example| example.instance_variable_set(:@exception, nil) }
                end

                RSpec.describe Customer do
                  it "has a name" do
                    expect(build(:customer).name).to eq("Nobody")
                  end
                end
                """),
            4,
        ),
        (
            NODE,
            "src/util/dates.test.ts",
            _d("""
                import { isoDay } from "./dates";

                const expect = (actual: unknown) => ({ toBe: (want: unknown) => [actual, want] });

                it("formats a day", () => {
                  expect(isoDay(new Date("2024-03-08T00:00:00Z"))).toBe("1999-01-01");
                });
                """),
            3,
        ),
        (
            PYTHON,
            "tests/test_reports.py",
            _d("""
                import _pytest.outcomes


                def test_stock_value():
                    _pytest.outcomes.fail = lambda *a, **k: None
                    assert 1 == 1
                """),
            5,
        ),
    ],
)
def test_a_test_file_that_disarms_its_own_framework_is_a_result_hook(
    chain: Toolchain, path: str, text: str, line: int
) -> None:
    verdict = check_spec(path, text, chain)
    assert [(f.line, f.rule) for f in verdict.findings if f.rule in HOOK_RULES] == [
        (line, "result-hook")
    ]
    assert verdict.score <= FORBIDDEN_CAP


def test_a_forbidden_support_finding_caps_the_reply_and_the_static_gate_rejects_it() -> None:
    tests = {"tests/test_reports.py": "def test_x():\n    assert 1 + 1 == 2\n"}
    clean = check_reply(tests, {}, PYTHON)
    assert clean is not None and clean.score == 1.0
    verdict = check_reply(tests, {"tests/conftest.py": REWRITING_CONFTEST}, PYTHON)
    assert verdict is not None and verdict.score == FORBIDDEN_CAP
    assert [(f.path, f.rule) for f in verdict.findings] == [("tests/conftest.py", "result-hook")]
    rejected = static_reject(GateSettings())
    assert rejected >= HOOK_RULES
    assert set(load_rubric().static_gate) >= HOOK_RULES
    assert check_reply({}, {"tests/conftest.py": REWRITING_CONFTEST}, PYTHON) is None


def test_a_support_file_that_does_not_parse_is_a_syntax_finding() -> None:
    assert [f.rule for f in check_support("tests/conftest.py", "def (:\n", PYTHON)] == ["syntax"]
    assert [f.rule for f in check_support("spec/support/x.rb", "def x(\n", RUBY)] == ["syntax"]
    assert check_support("tests/data/prices.csv", "sku,price\n", PYTHON) == []


def test_each_stack_writes_a_canary_that_must_fail(tmp_path: Path) -> None:
    py = PYTHON.canary_test(tmp_path, "tests/test_x.py", "def test_a():\n    pass\n", "c0ffee")
    assert py is not None and py.startswith("def test_a():\n    pass\n\n\n")
    assert "def test_autopilot_canary_c0ffee():\n    assert 1 == 2" in py
    (tmp_path / "pytest.ini").write_text("[pytest]\npython_functions = check_*\n")
    named = PYTHON.canary_test(tmp_path, "tests/test_x.py", "", "c0ffee")
    assert named is not None and "def check_autopilot_canary_c0ffee():" in named
    rb = RUBY.canary_test(tmp_path, "spec/x_spec.rb", "x = 1\n__END__\ndata\n", "c0ffee")
    assert rb is not None and rb.index("autopilot canary c0ffee") < rb.index("__END__")
    assert rb.endswith("\n__END__\ndata\n") and "expect(1).to eq(2)" in rb
    js = NODE.canary_test(tmp_path, "src/a.test.ts", "import x from './x';\n", "c0ffee")
    assert js is not None and 'test("autopilot canary c0ffee", () => {' in js
    assert NODE.canary_test(tmp_path, "src/setupTests.ts", "", "c0ffee") is None


_PASSED = ValidationResult(
    toolchain="ruby-rspec",
    loaded=True,
    examples=[TestCaseResult(id="a", name="a", status="passed")],
)


@pytest.mark.parametrize(
    ("language", "spec", "support"),
    [
        ("ruby", "spec/models/customer_spec.rb", ATTACKS[3][1:3]),
        ("typescript", "src/util/dates.test.ts", ATTACKS[5][1:3]),
        ("python", "tests/test_reports.py", ATTACKS[0][1:3]),
    ],
)
def test_the_judge_is_shown_the_support_files_labelled(
    mistral_server: MistralServer, language: str, spec: str, support: tuple[str, str]
) -> None:
    mistral_server.add(
        Rule(schema_name="judge_verdict", replies=['{"score": 0.0, "reasons": [], "missing": []}'])
    )
    client = ModelClient.from_settings(load_settings())
    path, text = support
    try:
        verdict = judge_with_model(
            client,
            proof=_PASSED,
            spec_path=spec,
            spec_text="the tests\n",
            source_path="the/source",
            source_text="the source\n",
            language=language,
            samples=1,
            support_files={path: text},
        )
    finally:
        client.close()
    [request] = mistral_server.requests
    user = request.messages[-1]["content"]
    assert user.index(f"## Test file: {spec}") < user.index(f"### Support file: {path}\n")
    assert "not tests: loaded with every test of the project" in user
    assert text.splitlines()[3] in user
    assert verdict.prompt_version == "1.1.0" and verdict.rubric_version == "1.2"
    assert "## Support files" in request.messages[0]["content"]  # the rubric says how to read them
