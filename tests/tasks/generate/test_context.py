"""Prompt context: the source, its specs, the factories it needs first, helpers, versions; never
a secret file or a secret value."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tasks.core.errors import BadInputError
from tasks.generate.context import build_context
from tasks.generate.targets import Target
from tasks.toolchains.registry import get_toolchain
from tasks.toolchains.ruby.context import gem_versions

RUBY = get_toolchain("ruby-rspec")
PYTHON = get_toolchain("python-pytest")

GEMFILE_LOCK = """\
GEM
  remote: https://rubygems.org/
  specs:
    actionpack (6.1.7.6)
    factory_bot (6.2.1)
      activesupport (>= 5.0.0)
    rails (6.1.7.6)
      actionpack (= 6.1.7.6)
    rspec-core (3.12.0)
    rspec-rails (5.1.2)
    rubocop (1.39.0)

PLATFORMS
  x86_64-linux

RUBY VERSION
   ruby 3.1.2p20

BUNDLED WITH
   2.3.15
"""
SECRET_VALUE = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def rails(tmp_path: Path) -> Path:
    _write(
        tmp_path,
        {
            "app/models/order.rb": "class Order < ApplicationRecord\n  belongs_to :customer\n"
            "  def total\n    Customer.first\n  end\nend\n",
            "spec/models/order_spec.rb": 'RSpec.describe Order do\n  it "x" do\n  end\nend\n',
            "spec/factories/widgets.rb": "FactoryBot.define { factory(:widget) {} }\n",
            "spec/factories/customers.rb": "FactoryBot.define { factory(:customer) {} }\n",
            "spec/factories/orders.rb": "FactoryBot.define { factory(:order) {} }\n",
            "spec/rails_helper.rb": 'require "spec_helper"\n',
            "spec/support/api.rb": f'STRIPE_SECRET_KEY = "{SECRET_VALUE}"\n',
            "db/schema.rb": 'create_table "orders"\n',
            "Gemfile.lock": GEMFILE_LOCK,
            ".env": f"API_KEY={SECRET_VALUE}\n",
        },
    )
    return tmp_path


ORDER = Target(
    source="app/models/order.rb",
    kind="model",
    specs=["spec/models/order_spec.rb"],
    spec="spec/models/order_spec.rb",
    reason="low-coverage",
)


def test_ruby_context_has_the_needed_factories_first_helpers_schema_and_versions(
    rails: Path,
) -> None:
    ctx = build_context(rails, ORDER, RUBY)

    assert ctx.source.startswith("class Order")
    assert [f.path for f in ctx.existing_specs] == ["spec/models/order_spec.rb"]
    paths = [f.path for f in ctx.context_files]
    assert paths[0] == "spec/rails_helper.rb"
    factories = [p for p in paths if p.startswith("spec/factories/")]
    # The factories the source uses (Customer, its own Order) before the unrelated one.
    assert factories == [
        "spec/factories/customers.rb",
        "spec/factories/orders.rb",
        "spec/factories/widgets.rb",
    ]
    assert "db/schema.rb" in paths
    assert "spec/models/order_spec.rb" not in paths  # given once, as an existing spec
    assert ctx.versions == {
        "ruby": "3.1.2p20",
        "factory_bot": "6.2.1",
        "rails": "6.1.7.6",
        "rspec-core": "3.12.0",
        "rspec-rails": "5.1.2",
        "rubocop": "1.39.0",
    }


def test_no_secret_file_or_value_reaches_the_context(rails: Path) -> None:
    # A factory with an innocent name that is a link to the .env file.
    (rails / "spec/factories/leak.rb").symlink_to(rails / ".env")
    ctx = build_context(rails, ORDER, RUBY)
    text = ctx.model_dump_json()
    paths = [f.path for f in ctx.context_files]
    assert "spec/factories/leak.rb" not in paths
    assert ".env" not in paths
    assert "spec/support/api.rb" in paths
    assert SECRET_VALUE not in text
    assert "[REDACTED]" in text


def test_a_secret_looking_source_is_refused(rails: Path) -> None:
    target = ORDER.model_copy(update={"source": ".env", "specs": []})
    with pytest.raises(BadInputError, match="secrets"):
        build_context(rails, target, RUBY)


def test_digest_follows_the_content_of_every_context_file(rails: Path) -> None:
    before = build_context(rails, ORDER, RUBY).digest()
    assert build_context(rails, ORDER, RUBY).digest() == before
    (rails / "spec/factories/widgets.rb").write_text("FactoryBot.define {}\n", encoding="utf-8")
    assert build_context(rails, ORDER, RUBY).digest() != before


def test_python_context_has_conftest_config_and_interpreter(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "src/pkg/mod.py": "def f() -> int:\n    return 1\n",
            "tests/conftest.py": "import pytest\n",
            "tests/unit/conftest.py": "X = 1\n",
            "pyproject.toml": '[project]\nname = "pkg"\nrequires-python = ">=3.11"\n',
            "docs/mod.md": "# mod\nf returns one.\n",
        },
    )
    target = Target(
        source="src/pkg/mod.py", kind="python", spec="tests/test_mod.py", reason="untested"
    )
    ctx = build_context(tmp_path, target, PYTHON)
    assert [f.path for f in ctx.context_files] == [
        "tests/conftest.py",
        "pyproject.toml",
        "tests/unit/conftest.py",
    ]
    assert ctx.versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert ctx.versions["requires-python"] == ">=3.11"
    assert ctx.docs.startswith("# mod")
    assert ctx.existing_specs == []


def test_gem_versions_without_a_lock_file_is_empty(tmp_path: Path) -> None:
    assert gem_versions(tmp_path) == {}


def test_controller_context_has_routes_superclass_and_the_classes_it_names(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "app/controllers/api/orders_controller.rb": "module Api\n"
            "  class OrdersController < Api::BaseController\n"
            "    def show\n      render json: OrderSerializer.new(Order.find(params[:id]))\n"
            "    end\n  end\nend\n",
            "app/controllers/api/base_controller.rb": "module Api\n"
            "  class BaseController < ApplicationController\n"
            "    before_action :authenticate!\n  end\nend\n",
            "app/serializers/order_serializer.rb": "class OrderSerializer\nend\n",
            "app/models/order.rb": "class Order < ApplicationRecord\nend\n",
            "app/models/widget.rb": "class Widget < ApplicationRecord\nend\n",
            "config/routes.rb": "Rails.application.routes.draw do\nend\n",
            "db/schema.rb": 'create_table "orders"\n',
        },
    )
    target = Target(
        source="app/controllers/api/orders_controller.rb",
        kind="controller",
        spec="spec/requests/api/orders_spec.rb",
        reason="untested",
    )
    paths = [f.path for f in build_context(tmp_path, target, RUBY).context_files]
    assert paths == [
        "config/routes.rb",
        "app/controllers/api/base_controller.rb",
        "app/serializers/order_serializer.rb",
        "app/models/order.rb",
        "db/schema.rb",
    ]


def test_mailer_context_has_its_templates(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "app/mailers/order_mailer.rb": "class OrderMailer < ApplicationMailer\nend\n",
            "app/mailers/application_mailer.rb": "class ApplicationMailer\nend\n",
            "app/views/order_mailer/confirmation.text.erb": "Thanks <%= @name %>\n",
            "app/views/other_mailer/x.text.erb": "no\n",
        },
    )
    target = Target(
        source="app/mailers/order_mailer.rb",
        kind="mailer",
        spec="spec/mailers/order_mailer_spec.rb",
        reason="untested",
    )
    paths = [f.path for f in build_context(tmp_path, target, RUBY).context_files]
    assert paths == [
        "app/views/order_mailer/confirmation.text.erb",
        "app/mailers/application_mailer.rb",
    ]


def test_python_context_has_the_project_modules_the_source_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "src/shop/__init__.py": "",
            "src/shop/orders.py": "import json\nimport shop.money\n"
            "from shop import stock\nfrom .pricing import total\nfrom ..outside import x\n"
            "from pydantic import BaseModel\n",
            "src/shop/money.py": "CENTS = 100\n",
            "src/shop/stock.py": "class Stock: ...\n",
            "src/shop/pricing.py": "def total(): ...\n",
            "src/shop/unused.py": "X = 1\n",
        },
    )
    target = Target(
        source="src/shop/orders.py", kind="python", spec="tests/t.py", reason="untested"
    )
    paths = [f.path for f in build_context(tmp_path, target, PYTHON).context_files]
    assert paths == [
        "src/shop/money.py",  # the empty package __init__.py says nothing: left out
        "src/shop/stock.py",
        "src/shop/pricing.py",
    ]
    # A source that does not parse still gets its context, without imports.
    (tmp_path / "src/shop/orders.py").write_text("from shop import stock\ndef broken(:\n")
    assert [f.path for f in build_context(tmp_path, target, PYTHON).context_files] == []
