# privface — the only entry points: make install | demo | test | lint (make native: rebuild the Rust core in place)
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.privface-installed
# Extra pytest arguments, e.g. make test TEST_ARGS="--runslow -x"
TEST_ARGS ?=
# The native core (Rust crate native/): `pip install -e` builds it in place (setuptools-rust), so a change to
# its sources reinstalls.
CARGO   ?= cargo
NATIVE_SRC := native/build.rs native/Cargo.toml native/Cargo.lock $(shell find native/src -type f 2>/dev/null)

.PHONY: install native demo test lint clean

install: $(STAMP)

$(STAMP): pyproject.toml $(NATIVE_SRC)
	@command -v $(CARGO) >/dev/null || { echo "make install: the native core needs a Rust toolchain (cargo): https://rustup.rs"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/privface demo

# The extension alone, rebuilt in place (src/privface/crypto/) for a checkout that runs from its sources
# (PYTHONPATH=src) with a venv of its own elsewhere; `make install` does the same through pip.
native:
	PYO3_BUILD_EXTENSION_MODULE=1 $(CARGO) build --release --quiet --manifest-path native/Cargo.toml --features extension-module
	rm -f src/privface/crypto/_native*.so
	cp native/target/release/lib_native.so src/privface/crypto/_native.abi3.so

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

clean:
	rm -rf $(VENV) build dist native/target src/privface/crypto/_native*.so src/*.egg-info .pytest_cache .ruff_cache .mypy_cache
