"""ruby-rspec toolchain against the real Rails example: rspec, SimpleCov and RuboCop in bwrap."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.types import CommandResult
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import CommandRunner, ToolchainError
from tasks.toolchains.registry import get_toolchain
from tasks.toolchains.ruby.lint import has_rubocop_config, parse_rubocop_json
from tasks.toolchains.ruby.run import parse_rspec_run
from tests.examples_repo import git, make_example_repo

TC = get_toolchain("ruby-rspec")

# SimpleCov's own figures for one file of a resultset: lines of code, covered, missed line numbers.
SIMPLECOV_FIGURES = """
require "json"
require "simplecov"
results = SimpleCov::Result.from_hash(JSON.parse(File.read(ARGV[0])))
file = results.flat_map(&:files).find { |f| f.project_filename == "/#{ARGV[1]}" }
puts JSON.dump([file.lines_of_code, file.covered_lines.size, file.missed_lines.map(&:line_number)])
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_example_repo("rails_shop", tmp_path / "shop")


def runner_for(repo: Path) -> CommandRunner:
    return make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)


def write(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.slow
def test_spec_passes_with_target_coverage_equal_to_simplecov(shop: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    result = TC.run_specs(
        shop,
        ["spec/models/product_spec.rb"],
        "app/models/product.rb",
        runner_for(shop),
        reports_dir=reports,
    )
    assert result.loaded and result.load_error is None
    assert result.passed
    assert len(result.examples) == 4
    assert {e.status for e in result.examples} == {"passed"}
    assert all(e.file == "spec/models/product_spec.rb" for e in result.examples)
    assert result.coverage is not None
    # reserve!'s out-of-stock raise is never reached by the shipped spec.
    assert result.coverage.uncovered_lines == [18]
    figures = subprocess.run(
        [
            "ruby",
            "-e",
            SIMPLECOV_FIGURES,
            str(reports / "coverage/.resultset.json"),
            "app/models/product.rb",
        ],
        cwd=shop,
        capture_output=True,
        text=True,
        check=True,
    )
    loc, covered, missed = json.loads(figures.stdout)
    assert (result.coverage.executable_lines, result.coverage.covered_lines) == (loc, covered)
    assert result.coverage.uncovered_lines == missed
    # Reports stay out of the repository: git sees nothing new.
    assert git(shop, "status", "--porcelain") == ""


@pytest.mark.slow
def test_weak_spec_still_passes(shop: Path) -> None:
    result = TC.run_specs(
        shop,
        ["spec/serializers/product_serializer_spec.rb"],
        "app/serializers/product_serializer.rb",
        runner_for(shop),
    )
    assert result.passed
    assert [e.name for e in result.examples] == ["ProductSerializer serializes a product"]
    assert result.coverage is not None and result.coverage.ratio == 1.0


@pytest.mark.slow
def test_a_run_without_coverage_reports_the_same_examples_and_no_coverage(shop: Path) -> None:
    result = TC.run_specs(
        shop,
        ["spec/serializers/product_serializer_spec.rb"],
        "app/serializers/product_serializer.rb",
        runner_for(shop),
        coverage=False,
    )
    assert result.passed
    assert [e.name for e in result.examples] == ["ProductSerializer serializes a product"]
    assert result.coverage is None


@pytest.mark.slow
def test_syntax_error_means_not_loaded(shop: Path) -> None:
    write(
        shop,
        "spec/models/customer_spec.rb",
        'require "rails_helper"\n\nRSpec.describe Customer do\n  it "x" do\n'
        '    expect(build(:customer).name).to eq("Ada Lovelace"\n  end\nend\n',
    )
    result = TC.run_specs(
        shop, ["spec/models/customer_spec.rb"], "app/models/customer.rb", runner_for(shop)
    )
    assert result.loaded is False
    assert result.passed is False
    assert result.examples == []
    assert result.load_error is not None
    assert "An error occurred while loading ./spec/models/customer_spec.rb" in result.load_error
    assert "syntax error" in result.load_error


@pytest.mark.slow
def test_name_error_at_load_means_not_loaded(shop: Path) -> None:
    write(
        shop,
        "spec/models/order_spec.rb",
        'require "rails_helper"\n\nRSpec.describe Ordr do\n  it "x" do\n    expect(1).to eq(1)\n'
        "  end\nend\n",
    )
    result = TC.run_specs(shop, ["spec/models/order_spec.rb"], None, runner_for(shop))
    assert result.loaded is False
    assert result.load_error is not None
    assert "uninitialized constant Ordr" in result.load_error


@pytest.mark.slow
def test_failures_and_errors_carry_messages_and_locations(shop: Path) -> None:
    write(
        shop,
        "spec/models/order_spec.rb",
        'require "rails_helper"\n\n'
        "RSpec.describe Order do\n"
        '  it "has a wrong expectation" do\n'
        "    expect(Order::STATUSES).to eq(%w[pending])\n"
        "  end\n\n"
        '  it "uses a factory that does not exist" do\n'
        "    create(:order)\n"
        "  end\n\n"
        '  it "knows its statuses" do\n'
        "    expect(Order::STATUSES.size).to eq(3)\n"
        "  end\n"
        "end\n",
    )
    result = TC.run_specs(
        shop, ["spec/models/order_spec.rb"], "app/models/order.rb", runner_for(shop)
    )
    assert result.loaded is True
    assert result.passed is False
    by_name = {e.name: e for e in result.examples}
    wrong = by_name["Order has a wrong expectation"]
    assert wrong.status == "failed"
    assert wrong.error_type == "RSpec::Expectations::ExpectationNotMetError"
    assert wrong.message is not None and 'expected: ["pending"]' in wrong.message
    assert wrong.line == 4
    assert wrong.locations[-1].path == "spec/models/order_spec.rb"
    assert wrong.locations[-1].line == 5
    missing = by_name["Order uses a factory that does not exist"]
    assert missing.status == "error"
    assert missing.error_type == "KeyError"
    assert missing.message == 'Factory not registered: "order"'
    assert by_name["Order knows its statuses"].status == "passed"


@pytest.mark.slow
def test_project_simplecov_start_is_neither_doubled_nor_fatal(shop: Path) -> None:
    # A project whose helper starts SimpleCov itself, with a minimum that this run misses and a
    # filter hiding lib/: the run must still pass and still measure lib/.
    helper = shop / "spec/rails_helper.rb"
    helper.write_text(
        'require "simplecov"\nSimpleCov.start("rails") do\n  minimum_coverage 99\n'
        '  add_filter "/lib/"\nend\n' + helper.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    result = TC.run_specs(
        shop,
        ["spec/lib/shop/discount_calculator_spec.rb"],
        "lib/shop/discount_calculator.rb",
        runner_for(shop),
    )
    assert result.passed, result.load_error
    assert result.coverage is not None
    assert result.coverage.executable_lines == 21
    assert result.coverage.covered_lines == 21


@pytest.mark.slow
def test_run_suite_reports_every_file(shop: Path) -> None:
    suite = TC.run_suite(shop, runner_for(shop))
    assert suite.validation.passed
    assert len(suite.validation.examples) == 14
    expected = {
        p.relative_to(shop).as_posix() for d in ("app", "lib") for p in (shop / d).rglob("*.rb")
    }
    assert set(suite.files) == expected
    # Untested files are reported at zero, not left out.
    placer = suite.files["app/services/order_placer.rb"]
    assert placer.executable_lines > 0 and placer.covered_lines == 0
    assert suite.files["app/helpers/price_helper.rb"].ratio == 1.0


@pytest.mark.slow
def test_timeout_gives_reason_not_pass(shop: Path) -> None:
    write(
        shop,
        "spec/lib/slow_spec.rb",
        'RSpec.describe "slow" do\n  it "sleeps" do\n    sleep 60\n  end\nend\n',
    )
    result = TC.run_specs(shop, ["spec/lib/slow_spec.rb"], None, runner_for(shop), timeout_s=4)
    assert result.passed is False
    assert result.reason is not None and "timeout" in result.reason


@pytest.mark.slow
def test_rubocop_offences_parsed_and_autocorrected(shop: Path) -> None:
    write(
        shop,
        "lib/shop/tax.rb",
        "# frozen_string_literal: true\n\nmodule Shop\n  # VAT.\n  module Tax\n"
        "    def self.rate(country)\n      return 'reduced' if country == 'FR'\n\n"
        '      unused = 1\n      "standard"\n    end\n  end\nend\n',
    )
    runner = runner_for(shop)
    offences = TC.lint(shop, ["lib/shop/tax.rb"], False, runner)
    found = sorted((o.rule, o.line, o.correctable) for o in offences)
    assert found == [
        ("Lint/UselessAssignment", 9, False),
        ("Style/StringLiterals", 7, True),
        ("Style/StringLiterals", 7, True),
    ]
    assert all(o.path == "lib/shop/tax.rb" for o in offences)
    remaining = TC.lint(shop, ["lib/shop/tax.rb"], True, runner)
    assert [(o.rule, o.line) for o in remaining] == [("Lint/UselessAssignment", 9)]
    assert 'return "reduced" if country == "FR"' in (shop / "lib/shop/tax.rb").read_text()


# A spec as a model writes it for an app that has no RuboCop configuration: no magic comment,
# single quotes, one example group longer than RuboCop's default 25-line block (36 lines).
LONG_SPEC = (
    "require 'rails_helper'\n\nRSpec.describe Product do\n"
    + "".join(
        f"  it 'keeps name {i}' do\n    expect(Product.new(name: 'n{i}').name).to eq('n{i}')\n"
        "  end\n\n"
        for i in range(12)
    )
    + "end\n"
)


@pytest.mark.slow
def test_app_without_rubocop_config_is_linted_with_defaults_fit_for_specs(shop: Path) -> None:
    (shop / ".rubocop.yml").unlink()
    write(shop, "spec/models/long_spec.rb", LONG_SPEC)
    runner = runner_for(shop)
    found = {o.rule for o in TC.lint(shop, ["spec/models/long_spec.rb"], False, runner)}
    # RuboCop's defaults hold, except the block length that every real spec exceeds.
    assert "Style/FrozenStringLiteralComment" in found
    assert "Metrics/BlockLength" not in found
    # Autocorrect applies the unsafe corrections too (the magic comment): the spec is clean, and
    # nothing of ours is left in the project.
    assert TC.lint(shop, ["spec/models/long_spec.rb"], True, runner) == []
    text = (shop / "spec/models/long_spec.rb").read_text()
    assert text.startswith("# frozen_string_literal: true\n")
    assert not list((shop / ".autopilot-tmp").glob("*/autopilot_rubocop.yml"))
    result = TC.run_specs(shop, ["spec/models/long_spec.rb"], "app/models/product.rb", runner)
    assert result.passed and len(result.examples) == 12


@pytest.mark.slow
def test_a_project_rubocop_config_wins_over_the_defaults(shop: Path) -> None:
    config = (shop / ".rubocop.yml").read_text()
    (shop / ".rubocop.yml").write_text(
        config.replace('    - "spec/**/*"\n    - "config', '    - "config')
    )
    write(shop, "spec/models/long_spec.rb", LONG_SPEC)
    found = {o.rule for o in TC.lint(shop, ["spec/models/long_spec.rb"], True, runner_for(shop))}
    assert found == {"Metrics/BlockLength"}


@pytest.mark.slow
def test_shipped_app_is_rubocop_clean_and_syntax_errors_are_offences(shop: Path) -> None:
    runner = runner_for(shop)
    assert (
        TC.lint(shop, ["app/models/product.rb", "spec/models/product_spec.rb"], False, runner) == []
    )
    write(shop, "lib/broken.rb", "def x(\n")
    offences = TC.lint(shop, ["lib/broken.rb"], False, runner)
    assert [o.rule for o in offences] == ["Lint/Syntax"]


def test_missing_report_is_not_loaded_with_reason(tmp_path: Path) -> None:
    cmd = CommandResult(
        argv=["rspec"], exit_code=137, stderr="Killed", reason="memory limit reached"
    )
    result = parse_rspec_run(tmp_path, tmp_path / "missing.json", cmd)
    assert result.loaded is False
    assert result.reason == "memory limit reached"
    assert result.load_error == "rspec exited 137: memory limit reached\nKilled"


def test_broken_report_is_not_loaded(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text("[1, 2", encoding="utf-8")
    cmd = CommandResult(argv=["rspec"], exit_code=1)
    result = parse_rspec_run(tmp_path, report, cmd)
    assert result.loaded is False
    assert result.load_error == "rspec exited 1: no usable RSpec JSON report (JSONDecodeError)"


def test_exit_failure_without_examples_is_not_loaded(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"examples": [], "summary": {}}), encoding="utf-8")
    cmd = CommandResult(argv=["rspec"], exit_code=1, stderr="cannot load such file -- nope")
    result = parse_rspec_run(tmp_path, report, cmd)
    assert result.loaded is False
    assert result.load_error == "cannot load such file -- nope"


def test_rubocop_garbage_raises_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="rubocop printed no JSON report"):
        parse_rubocop_json("Error: unknown cop Foo/Bar", tmp_path)


@pytest.mark.slow
def test_suite_with_a_broken_spec_and_without_it(shop: Path) -> None:
    write(shop, "spec/models/order_spec.rb", 'require "rails_helper"\nRSpec.describe Order do\n')
    runner = runner_for(shop)
    broken = TC.run_suite(shop, runner)
    assert broken.validation.loaded is False
    assert broken.validation.load_error is not None
    assert "while loading ./spec/models/order_spec.rb" in broken.validation.load_error
    rest = TC.run_suite(shop, runner, exclude=["spec/models/order_spec.rb"])
    assert rest.validation.passed
    assert len(rest.validation.examples) == 14
    assert rest.files["app/models/product.rb"].covered_lines > 0


def test_rubocop_config_is_found_where_rubocop_finds_it(tmp_path: Path) -> None:
    app = tmp_path / "mono" / "apps" / "shop"
    (app / "spec" / "models").mkdir(parents=True)
    assert not has_rubocop_config(app, ["spec/models/a_spec.rb"])
    (tmp_path / "mono" / ".rubocop.yml").write_text("AllCops: {}\n")  # the monorepo's root
    assert has_rubocop_config(app, ["spec/models/a_spec.rb"])
    (tmp_path / "mono" / ".rubocop.yml").unlink()
    (app / "spec" / ".rubocop.yml").write_text("AllCops: {}\n")  # the spec tree's own
    assert has_rubocop_config(app, ["spec/models/a_spec.rb"])
    assert not has_rubocop_config(app, ["lib/x.rb"])


ORDER_PAY_SPEC = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe Order, type: :model do
  it "pays a pending order" do
    customer = Customer.create!(name: "Ada", email: "ada@example.com")
    product = Product.create!(name: "Lamp", price_cents: 1000, stock: 3)
    order = Order.create!(customer: customer, product: product, quantity: 1,
                          total_cents: 1000, status: "pending")
    order.pay!
    expect(order.reload.status).to eq("paid")
  end
end
"""


@pytest.mark.slow
def test_simplecov_branch_coverage_names_the_branch_never_taken(shop: Path) -> None:
    # pay! runs only on a pending order: its `unless` (line 17) never raises; cancel! never runs.
    write(shop, "spec/models/order_pay_spec.rb", ORDER_PAY_SPEC)
    result = TC.run_specs(
        shop, ["spec/models/order_pay_spec.rb"], "app/models/order.rb", runner_for(shop)
    )
    assert result.passed, result
    cov = result.coverage
    assert cov is not None and cov.branches is not None and cov.covered_branches is not None
    assert 0 < cov.covered_branches < cov.branches
    assert 17 in cov.partial_lines
    assert 23 in cov.uncovered_lines and 23 not in cov.partial_lines
