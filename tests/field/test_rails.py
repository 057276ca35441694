"""Field cases of real Rails apps, reproduced on copies of the example app with the real tools
(RSpec, SimpleCov, RuboCop, Bundler, git, bubblewrap): the project's lint configuration is
honoured or its failure is one clear line, a Gemfile Bundler refuses is a suite that did not
run, and specs are mapped to sources by what they execute as well as by their names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.audit.run import audit_repo
from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import ToolchainError
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git, make_example_repo
from tests.field_repos import write_tree
from tests.paths import REPO_ROOT

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))


def _shop(tmp_path: Path, files: dict[str, str], remove: tuple[str, ...] = ()) -> Path:
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    write_tree(repo, files)
    for rel in remove:
        (repo / rel).unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "field case")
    return repo


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run([AUTOPILOT, *args], capture_output=True, text=True, timeout=600, env=env)


LISTING = """\
# frozen_string_literal: true

# Ordering shared by the listing actions.
module Listing
  extend ActiveSupport::Concern

  def listed(scope)
    scope.order(:id)
  end
end
"""
SKU = """\
# frozen_string_literal: true

# Stock keeping unit codes.
module Sku
  def self.code(number)
    format("SKU-%05d", number)
  end
end
"""
SKU_SPEC = """\
# frozen_string_literal: true

require_relative "../../extras/sku"

RSpec.describe Sku do
  it "pads the number" do
    expect(described_class.code(42)).to eq("SKU-00042")
  end
end
"""
NO_SUFFIX = """\
# frozen_string_literal: true

require "rails_helper"

RSpec.describe Order do
  it "is never run" do
    expect(1).to eq(2)
  end
end
"""


@pytest.mark.slow
def test_rails_evidence_plain_ruby_folders_and_specs_rspec_would_skip(tmp_path: Path) -> None:
    controller = Path("examples/rails_shop/app/controllers/api/products_controller.rb")
    text = (REPO_ROOT / controller).read_text()
    text = text.replace(
        "class ProductsController < ApplicationController\n",
        ("class ProductsController < ApplicationController\n    include Listing\n\n"),
    ).replace("Product.available.order(:id)", "listed(Product.available)")
    repo = _shop(
        tmp_path,
        {
            "app/controllers/concerns/listing.rb": LISTING,
            "app/controllers/api/products_controller.rb": text,
            "extras/sku.rb": SKU,
            "spec/extras/sku_spec.rb": SKU_SPEC,
            "spec/models/order_check.rb": NO_SUFFIX,
        },
    )
    report = audit_repo(repo)
    assert report.suite.ran, report.suite.problem
    by = {f.source: f for f in report.files}
    # A concern no spec is named after, exercised by the request spec.
    concern = by["app/controllers/concerns/listing.rb"]
    assert concern.specs == []
    assert concern.covered_by == ["spec/requests/api/products_spec.rb"]
    assert concern.status == "tested" and concern.coverage == 1.0
    # Plain Ruby outside app/ and lib/.
    sku = by["extras/sku.rb"]
    assert (sku.kind, sku.specs, sku.status) == (
        "ruby",
        ["spec/extras/sku_spec.rb"],
        "tested",
    )
    assert report.warnings == [
        "spec/models/order_check.rb: holds examples but RSpec only loads files ending in "
        "_spec.rb (rename it spec/models/order_check_spec.rb)"
    ]
    assert report.summary.tests.failed == 0  # the misnamed spec's failing example never ran


@pytest.mark.slow
def test_rails_app_with_standard_and_an_unknown_ruby_version(tmp_path: Path) -> None:
    repo = _shop(
        tmp_path,
        {".standard.yml": "ignore:\n  - 'db/**/*'\n", ".ruby-version": "3.9.0\n"},
        remove=(".rubocop.yml",),
    )
    done = _cli("audit", "--repo", str(repo), "--json")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        "autopilot: error: standardrb: the project lints with Standard (.standard.yml) but the "
        'standard gem is not installed: add `gem "standard"` to the Gemfile and run `bundle '
        "install`, or `gem install standard`"
    )
    doc = json.loads(done.stdout)
    # The suite itself ran and was measured; no RuboCop defaults were applied instead.
    assert doc["suite"]["ran"] is True and doc["summary"]["tests"]["passed"] > 0
    assert all(f["lint_offenses"] == 0 for f in doc["files"])
    assert doc["errors"] == [line.removeprefix("autopilot: error: ")]


@pytest.mark.slow
def test_rubocop_not_knowing_the_projects_ruby_is_one_line_with_the_fix(tmp_path: Path) -> None:
    config = (REPO_ROOT / "examples/rails_shop/.rubocop.yml").read_text()
    repo = _shop(
        tmp_path,
        {
            ".rubocop.yml": config.replace("  TargetRubyVersion: 3.1\n", ""),
            ".ruby-version": "3.9.0\n",
        },
    )
    runner = make_runner(SandboxSettings(backend="bwrap"), root=repo)
    with pytest.raises(ToolchainError) as err:
        get_toolchain("ruby-rspec").lint(repo, ["spec/models/product_spec.rb"], False, runner)
    line = str(err.value)
    assert line.startswith(
        "rubocop: RuboCop does not know Ruby 3.9 (named in .ruby-version) (set `AllCops: "
        "TargetRubyVersion: 3."
    )
    assert line.endswith("in .rubocop.yml, or use a RuboCop release that supports that Ruby)")
    assert "\n" not in line


@pytest.mark.slow
def test_a_gemfile_bundler_cannot_parse_is_a_suite_that_did_not_run(tmp_path: Path) -> None:
    gemfile = (REPO_ROOT / "examples/rails_shop/Gemfile").read_text()
    repo = _shop(tmp_path, {"Gemfile": gemfile.replace('gem "rails", ', 'gem "rails",, ')})
    done = _cli("audit", "--repo", str(repo), "--json")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    # The bundle is prepared (installed once, reused) before any run: Bundler's parse error
    # comes from that step, as the suite's problem.
    assert line.startswith("autopilot: suite did not run: bundler: ")
    assert "syntax error, unexpected ','" in line and '- gem "rails",, "~> 6.1.7"' in line
    doc = json.loads(done.stdout)
    assert doc["suite"]["problem"]["tool"] == "bundler"
    assert doc["suite"]["problem"]["cause"] == "environment"
    assert doc["summary"]["specs_passing"] == 0 and doc["summary"]["line_coverage"] == 0


@pytest.mark.slow
def test_a_spec_that_exits_while_loading_is_set_aside_and_the_rest_runs(tmp_path: Path) -> None:
    # rspec-rails does this for a system spec when capybara is missing: RSpec quits at once,
    # leaving an empty JSON report.
    aborting = (
        '# frozen_string_literal: true\n\nrequire "rails_helper"\n\n'
        'abort("LoadError: cannot load such file -- capybara")\n'
    )
    repo = _shop(tmp_path, {"spec/system/browse_spec.rb": aborting})
    report = audit_repo(repo)
    assert report.suite.ran, report.suite.problem
    assert list(report.suite.set_aside) == ["spec/system/browse_spec.rb"]
    assert report.suite.set_aside["spec/system/browse_spec.rb"].startswith("did not load")
    assert report.summary.tests.passed > 0
