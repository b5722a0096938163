# Middleware Hub developer tasks. Tools run from .venv/bin; nothing needs activating.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.requirements-installed
DEV_STAMP := $(VENV)/.requirements-dev-installed
JS_DIR := plugins_app/runtime/js
JS_STAMP := $(JS_DIR)/node_modules/.lock-installed

.PHONY: venv dev js cli install migrate demo run test lint typecheck migrations-check check bench bench-load bench-hostile bench-io bench-overload chaos soak screenshots editor


venv: $(VENV_STAMP)

# Reinstalls only when requirements.txt changes (or the venv is missing).
$(VENV_STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements.txt
	touch $@

# Test and code-health tools (pytest, Playwright, ruff, mypy, pre-commit) on top of the runtime's.
dev: $(DEV_STAMP)

$(DEV_STAMP): requirements-dev.txt $(VENV_STAMP)
	$(BIN)/pip install -r requirements-dev.txt
	touch $@

js: $(JS_STAMP)

$(JS_STAMP): $(JS_DIR)/package-lock.json $(JS_DIR)/package.json
	cd $(JS_DIR) && npm ci && npm run build
	touch $@

install: venv js cli

# .venv/bin/hub: a launcher of this checkout's hub_cli (docs/cli.md).
cli: $(BIN)/hub

$(BIN)/hub: hub_cli/install.py $(VENV_STAMP)
	$(BIN)/python -m hub_cli.install $(BIN)

migrate: venv
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py sync_catalog
	$(BIN)/python manage.py load_demo

run: install migrate demo
	bin/run-dev

test: install dev
	$(BIN)/pytest $(PYTEST_ARGS)

# Settings in pyproject.toml; the same checks run before each commit with `pre-commit install`.
lint: dev
	$(BIN)/ruff check .

typecheck: dev
	$(BIN)/mypy

# Fails when a model change has no migration.
migrations-check: venv
	$(BIN)/python manage.py makemigrations --check --dry-run

check: lint typecheck migrations-check

# LOAD_ARGS passes options to bench/load.py, e.g. LOAD_ARGS="--phase-seconds 10 --accounts 300".
bench: install
	$(BIN)/python bench/run.py
	$(BIN)/python bench/load.py $(LOAD_ARGS)
	$(BIN)/python bench/hostile.py
	$(BIN)/python bench/io.py $(IO_ARGS)
	$(BIN)/python bench/overload.py $(OVERLOAD_ARGS)
	$(BIN)/python bench/check.py
	$(BIN)/python bench/kv.py
	$(BIN)/python bench/typecheck.py

# Good accounts beside one deliberate tenant at a time (issue 28): victims' p50/p99/max as ratios.
bench-hostile: install
	$(BIN)/python bench/hostile.py

bench-load: install
	$(BIN)/python bench/load.py $(LOAD_ARGS)

# Plugins that wait on I/O (issue 38): calls/s against the ideal, p50/p99, errors, the hub's memory, and
# quiet tenants beside each load. IO_ARGS passes options, e.g. IO_ARGS="--scenarios a,c --seconds 10".
bench-io: install
	$(BIN)/python bench/io.py $(IO_ARGS)

# Overload (issue 40): open loop at 1x, 2x and 5x the measured sustainable rate, then 0.3x; answered calls
# p50/p99, 503s (load shedding) and their answer time, recovery. OVERLOAD_ARGS="--seconds 20 --accounts 16".
bench-overload: install
	$(BIN)/python bench/overload.py $(OVERLOAD_ARGS)

# A whole hub under a low steady load; every process's RSS slope (issue 29). SOAK_ARGS="--minutes 60".
soak: install
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

# Kills each part of a hub (engines, supervisor, Redis, worker and beat; PostgreSQL when DATABASE_URL
# names one) under a small load and prints what each cost (issue 29; docs/production.md).
chaos: install dev
	HUB_TEST_REDIS=1 $(BIN)/pytest -q -p no:cacheprovider tests/integration/faults

# Regenerates docs/screenshots/*.png from the browser tests (headless Debian chromium).
screenshots: install
	HUB_TEST_BROWSER=1 HUB_SCREENSHOTS_DIR=docs/screenshots $(BIN)/pytest -q -p no:cacheprovider tests/browser

# Rebuilds static/hub_admin/editor.js (CodeMirror 6) from frontend/; the built file is committed.
editor:
	cd frontend && npm ci && npm run build
