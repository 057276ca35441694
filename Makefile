# Two commands for a newcomer: `make demo` and `make test`. Both set up what is missing first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := ruby ruby-rspec ruby-rspec-rails ruby-rails ruby-factory-bot-rails ruby-simplecov \
	rubocop ruby-sqlite3 ruby-rspec-junit-formatter bubblewrap git chromium chromium-driver \
	docker.io docker-compose debootstrap postgresql redis-server ruby-pg nodejs
SETUP_STAMP := $(VENV)/.setup-stamp
# What the demo needs, and nothing more (a newcomer's first command stays quick): the Ruby
# toolchain for the Rails example, bubblewrap, git. `make test` installs the rest.
DEMO_PACKAGES := ruby ruby-rspec ruby-rspec-rails ruby-rails ruby-factory-bot-rails ruby-simplecov \
	rubocop ruby-sqlite3 ruby-rspec-junit-formatter bubblewrap git
DEMO_STAMP := $(VENV)/.setup-demo-stamp

.PHONY: setup demo test lint typecheck pytest bench clean

setup: $(SETUP_STAMP)

$(SETUP_STAMP): pyproject.toml uv.lock scripts/setup.sh toolchains/node/package-lock.json
	APT_PACKAGES="$(APT_PACKAGES)" bash scripts/setup.sh
	touch $(SETUP_STAMP)

$(DEMO_STAMP): pyproject.toml uv.lock scripts/setup.sh
	APT_PACKAGES="$(DEMO_PACKAGES)" bash scripts/setup.sh
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/autopilot demo --example examples/rails_shop

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy

# The docker tests need an engine: started here when none runs, and stopped after if it was.
pytest: setup
	bash scripts/docker-engine.sh run -- bash scripts/run_pytest.sh

test: lint typecheck pytest

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
