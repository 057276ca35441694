"""The example projects as shipped: real suites pass offline, lint is clean, half is untested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples_repo import EXAMPLES, git, make_example_repo


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BUNDLE_", "RUBY"))}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_make_example_repo_commits_a_clean_tree(tmp_path: Path) -> None:
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    assert git(repo, "status", "--porcelain") == ""
    tracked = git(repo, "ls-files").split()
    # The lock file is made offline for this machine and committed in the copy only.
    assert "Gemfile.lock" in tracked
    assert "rails (6.1.7" in (repo / "Gemfile.lock").read_text(encoding="utf-8")
    assert "Gemfile.lock" not in git(EXAMPLES.parent, "ls-files", "examples/rails_shop")
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    with pytest.raises(ValueError, match="not empty"):
        make_example_repo("rails_shop", repo)
    with pytest.raises(ValueError, match="no example named 'nope'"):
        make_example_repo("nope", tmp_path / "x")


@pytest.mark.slow
def test_rails_shop_suite_passes_offline(tmp_path: Path) -> None:
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    done = run(["bundle", "exec", "rspec", "--format", "json"], repo)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["summary"]["example_count"] == 14
    assert report["summary"]["failure_count"] == 0
    assert report["summary"]["errors_outside_of_examples_count"] == 0


@pytest.mark.slow
def test_rails_shop_is_rubocop_clean(tmp_path: Path) -> None:
    repo = make_example_repo("rails_shop", tmp_path / "shop")
    done = run(["rubocop", "--format", "json"], repo)
    assert done.returncode == 0, done.stdout[-2000:]
    report = json.loads(done.stdout)
    assert report["summary"]["offense_count"] == 0
    assert report["summary"]["inspected_file_count"] >= 30


def test_rails_shop_is_half_specced() -> None:
    app = EXAMPLES / "rails_shop"
    sources = {
        p.relative_to(app).as_posix()
        for d in ("app/models", "app/serializers", "app/helpers", "app/services", "lib/shop")
        for p in (app / d).glob("*.rb")
    } | {
        "app/controllers/api/products_controller.rb",
        "app/controllers/api/orders_controller.rb",
        "app/mailers/order_mailer.rb",
    }
    specs = {p.relative_to(app).as_posix() for p in (app / "spec").rglob("*_spec.rb")}
    assert specs == {
        "spec/models/product_spec.rb",
        "spec/helpers/price_helper_spec.rb",
        "spec/serializers/product_serializer_spec.rb",
        "spec/requests/api/products_spec.rb",
        "spec/lib/shop/discount_calculator_spec.rb",
    }
    # Every Rails kind is present, tested or not.
    assert {
        "app/models/order.rb",
        "app/serializers/order_serializer.rb",
        "app/mailers/order_mailer.rb",
        "app/services/order_placer.rb",
        "app/helpers/price_helper.rb",
    } <= sources
    # Factories exist for some models only: a generator must create the missing ones.
    factories = {p.name for p in (app / "spec/factories").glob("*.rb")}
    assert factories == {"products.rb", "customers.rb"}


@pytest.mark.slow
def test_py_inventory_suite_passes_without_install(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    done = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], repo)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "11 passed" in done.stdout


@pytest.mark.slow
def test_py_inventory_is_ruff_clean(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    done = run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], repo)
    assert done.returncode == 0, done.stdout
    fmt = run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], repo)
    assert fmt.returncode == 0, fmt.stdout


def test_py_inventory_is_half_tested() -> None:
    pkg = EXAMPLES / "py_inventory"
    modules = {p.stem for p in (pkg / "src/inventory").glob("*.py")} - {"__init__"}
    tested = {p.stem.removeprefix("test_") for p in (pkg / "tests").glob("test_*.py")}
    assert modules == {"csv_import", "errors", "pricing", "reports", "stock", "units"}
    assert tested == {"pricing", "stock", "units"}
