# Middleware Hub developer tasks. Tools run from .venv/bin; nothing needs activating.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.requirements-installed
JS_DIR := plugins_app/runtime/js
JS_STAMP := $(JS_DIR)/node_modules/.lock-installed

.PHONY: venv js install migrate demo run test bench bench-load screenshots editor

venv: $(VENV_STAMP)

# Reinstalls only when requirements.txt changes (or the venv is missing).
$(VENV_STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements.txt
	touch $@

js: $(JS_STAMP)

$(JS_STAMP): $(JS_DIR)/package-lock.json $(JS_DIR)/package.json
	cd $(JS_DIR) && npm ci && npm run build
	touch $@

install: venv js

migrate: venv
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py sync_catalog
	$(BIN)/python manage.py load_demo

run: install migrate demo
	bin/run-dev

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

# LOAD_ARGS passes options to bench/load.py, e.g. LOAD_ARGS="--phase-seconds 10 --accounts 300".
bench: install
	$(BIN)/python bench/run.py
	$(BIN)/python bench/load.py $(LOAD_ARGS)

bench-load: install
	$(BIN)/python bench/load.py $(LOAD_ARGS)

# Regenerates docs/screenshots/*.png from the browser tests (headless Debian chromium).
screenshots: install
	HUB_TEST_BROWSER=1 HUB_SCREENSHOTS_DIR=docs/screenshots $(BIN)/pytest -q -p no:cacheprovider tests/browser

# Rebuilds static/hub_admin/editor.js (CodeMirror 6) from frontend/; the built file is committed.
editor:
	cd frontend && npm ci && npm run build
