# privface — the only entry points: make install | demo | test | lint
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.privface-installed
# Extra pytest arguments, e.g. make test TEST_ARGS="--runslow -x"
TEST_ARGS ?=

.PHONY: install demo test lint clean

install: $(STAMP) web

# The browser client (web/, TypeScript): npm ci from the committed lockfile, then the esbuild bundle into
# src/privface/service/webapp/ (git-ignored package data served at /app/) and the Node test driver.
WEB_DEPS := web/node_modules/.package-lock.json
WEBAPP   := src/privface/service/webapp/app.js
.PHONY: web
web: $(WEBAPP)

$(WEB_DEPS): web/package-lock.json web/package.json
	cd web && npm ci --no-audit --no-fund
	touch $(WEB_DEPS)

$(WEBAPP): $(WEB_DEPS) $(shell find web/src web/test web/static -type f 2>/dev/null) web/build.mjs src/privface/wire/schema.json
	cd web && npx tsc --noEmit -p $$(test -f src/face/index.ts && echo tsconfig.json || echo tsconfig.noface.json) && node build.mjs

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/privface demo

test: install
	$(PY) -m pytest $(TEST_ARGS)

.PHONY: lint
# import contracts ([tool.importlinter]); ruff over src, tests and fuzz; mypy over the packages in [tool.mypy] files
lint: install
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check src tests fuzz
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .mypy_cache web/node_modules web/dist-test src/privface/service/webapp
