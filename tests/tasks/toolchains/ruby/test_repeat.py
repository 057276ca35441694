"""RSpec's repeats in one Ruby process (real rspec, SimpleCov and bwrap): one result per run,
the spec files loaded again each run, a failure or load error in any run reported as that run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import CommandRunner, Toolchain
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo

TC = get_toolchain("ruby-rspec")

CALC = """\
module Calc
  def self.double(x)
    x * 2
  end
end
"""
PASSING = """\
require_relative "../lib/calc"

RSpec.describe Calc do
  it("doubles") { expect(Calc.double(2)).to eq(4) }
  it("doubles zero") { expect(Calc.double(0)).to eq(0) }
end
"""
#: Passes in a fresh process, fails when the same process runs it a second time.
LEAKS_STATE = """\
RSpec.describe "a global counter" do
  it "is seen once" do
    $autopilot_seen = ($autopilot_seen || 0) + 1
    expect($autopilot_seen).to eq(1)
  end
end
"""
#: Loads the first time, raises when loaded again in the same process.
LOADS_ONCE = """\
raise "loaded twice" if $autopilot_loaded
$autopilot_loaded = true

RSpec.describe "loading" do
  it("runs") { expect(1).to eq(1) }
end
"""
#: Fails in the second process that runs it (a counter file in the project).
SECOND_PROCESS_FAILS = """\
RSpec.describe "a counter file" do
  it "fails on the second run" do
    path = File.join(__dir__, "count.txt")
    n = File.exist?(path) ? File.read(path).to_i + 1 : 1
    File.write(path, n.to_s)
    expect(n).not_to eq(2)
  end
end
"""


def runner_for(repo: Path) -> CommandRunner:
    return make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A project without a Gemfile (plain `ruby`): lib/calc.rb and a few spec files."""
    root = tmp_path / "tiny"
    (root / "lib").mkdir(parents=True)
    (root / "spec").mkdir()
    (root / "lib" / "calc.rb").write_text(CALC, encoding="utf-8")
    for name, text in {
        "calc_spec.rb": PASSING,
        "leaks_spec.rb": LEAKS_STATE,
        "loads_once_spec.rb": LOADS_ONCE,
        "second_process_spec.rb": SECOND_PROCESS_FAILS,
    }.items():
        (root / "spec" / name).write_text(text, encoding="utf-8")
    return root


def test_every_run_reports_the_same_examples_and_the_first_carries_coverage(tiny: Path) -> None:
    results = TC.run_repeats(
        tiny, ["spec/calc_spec.rb"], "lib/calc.rb", runner_for(tiny), runs=3, coverage=True
    )
    assert len(results) == 3
    assert all(r.loaded and r.passed for r in results)
    assert [[e.id for e in r.examples] for r in results] == [
        ["./spec/calc_spec.rb[1:1]", "./spec/calc_spec.rb[1:2]"]
    ] * 3
    assert results[0].coverage is not None and results[0].coverage.ratio == 1.0
    assert all(r.coverage is None for r in results[1:])
    assert all(r.specs == ["spec/calc_spec.rb"] and r.target == "lib/calc.rb" for r in results)
    assert not list((tiny / ".autopilot-tmp").glob("*/rspec-*.json"))  # scratch removed


def test_a_run_that_fails_is_reported_as_that_run_and_ends_the_runs(tiny: Path) -> None:
    results = TC.run_repeats(tiny, ["spec/leaks_spec.rb"], None, runner_for(tiny), runs=3)
    # One process: the global survives the world reset, so the second run sees it.
    assert [r.passed for r in results] == [True, False]
    failed = results[1].examples[0]
    assert failed.status == "failed" and "expected: 1" in (failed.message or "")


def test_a_spec_file_that_does_not_load_again_is_a_load_error_of_that_run(tiny: Path) -> None:
    results = TC.run_repeats(tiny, ["spec/loads_once_spec.rb"], None, runner_for(tiny), runs=3)
    assert results[0].loaded and results[0].passed
    assert len(results) == 2
    assert not results[1].loaded
    assert "loaded twice" in (results[1].load_error or "")


def test_the_default_runs_one_process_per_run(tiny: Path) -> None:
    """The interface's default (a stack without its own repeats): separate processes."""
    spec = ["spec/second_process_spec.rb"]
    results = Toolchain.run_repeats(TC, tiny, spec, None, runner_for(tiny), runs=3)
    assert [r.passed for r in results] == [True, False]
    assert (tiny / "spec" / "count.txt").read_text() == "2"
    # The same spec in one process continues the file's count (3, 4): no run fails.
    again = TC.run_repeats(tiny, spec, None, runner_for(tiny), runs=2)
    assert [r.passed for r in again] == [True, True]


@pytest.mark.slow
def test_rails_boots_once_and_coverage_matches_a_separate_run(tmp_path: Path) -> None:
    shop = make_example_repo("rails_shop", tmp_path / "shop")
    spec, target = ["spec/models/product_spec.rb"], "app/models/product.rb"
    alone = TC.run_specs(shop, spec, target, runner_for(shop))
    results = TC.run_repeats(shop, spec, target, runner_for(shop), runs=4, coverage=True)
    assert len(results) == 4 and all(r.passed for r in results)
    # The project orders its examples at random (each run its own order): the same set.
    assert sorted(e.id for e in results[3].examples) == sorted(e.id for e in alone.examples)
    assert results[0].coverage == alone.coverage


def test_random_order_gets_a_new_seed_each_run_and_a_forced_seed_stays(tiny: Path) -> None:
    (tiny / "spec" / "spec_helper.rb").write_text(
        "RSpec.configure { |c| c.order = :random }\n", encoding="utf-8"
    )
    many = "\n".join(f'  it("is {i}") {{ expect({i}).to eq({i}) }}' for i in range(10))
    (tiny / "spec" / "many_spec.rb").write_text(
        f'require_relative "spec_helper"\n\nRSpec.describe "many" do\n{many}\nend\n',
        encoding="utf-8",
    )
    spec = ["spec/many_spec.rb"]
    results = TC.run_repeats(tiny, spec, None, runner_for(tiny), runs=3)
    orders = {tuple(e.id for e in r.examples) for r in results}
    assert all(r.passed for r in results) and len(orders) > 1  # 10! orders: equal by chance ~0
    (tiny / ".rspec").write_text("--seed 1234\n", encoding="utf-8")
    forced = TC.run_repeats(tiny, spec, None, runner_for(tiny), runs=3)
    assert len({tuple(e.id for e in r.examples) for r in forced}) == 1


def test_a_run_stopped_by_the_timeout_is_that_runs_result(tiny: Path) -> None:
    (tiny / "spec" / "hangs_spec.rb").write_text(
        'RSpec.describe "hangs" do\n  it "hangs the second time" do\n'
        "    $autopilot_hang = ($autopilot_hang || 0) + 1\n"
        "    sleep 600 if $autopilot_hang == 2\n    expect(1).to eq(1)\n  end\nend\n",
        encoding="utf-8",
    )
    results = TC.run_repeats(
        tiny, ["spec/hangs_spec.rb"], None, runner_for(tiny), runs=3, timeout_s=20
    )
    assert results[0].passed
    assert len(results) == 2 and not results[1].passed
    assert "time" in (results[1].reason or "")
