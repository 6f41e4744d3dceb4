# The two commands of README.md. Each creates .venv when missing; a stamp file keyed on pyproject.toml makes a
# second run install nothing.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.compiled
BIN := $(VENV)/bin

.PHONY: demo demo-quick test test-fast calibrate lint typecheck venv install clean bench

venv: $(COMPILED)

# The package and its dependencies only (.ci/run installs Chromium meanwhile); `make test` then compiles beside mypy.
install: $(STAMP)

# pip compiles every installed file on one core (about 50 s of a clean install here); the install skips it and
# $(COMPILED) compiles on both cores, beside mypy under `make test`. Compiled files are needed where
# PYTHONDONTWRITEBYTECODE is set: every process would otherwise recompile torch and transformers on import.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (README: fresh machine with Python 3.11)"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	@rm -f $(COMPILED)
	@touch $(STAMP)

# compileall exits 1 when any file fails to compile; some packages ship files for other Pythons (pip ignores
# those too), so its status is not the venv's.
$(COMPILED): $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") >/dev/null 2>&1 || true
	@touch $(COMPILED)

demo: $(COMPILED)
	$(BIN)/remnant demo --quick

# Benchmarks (DESIGN §6): ratios of fast paths to their baselines, written to benchmarks/RESULTS.md.
# `make bench BENCH_ARGS=--smollm2` adds SmolLM2-135M-Instruct.
bench: $(COMPILED)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks)
	$(BIN)/ruff format --check src tests $(wildcard benchmarks)

# mypy --strict (pyproject.toml) on the whole package, the model edge included.
typecheck: $(STAMP)
	$(BIN)/mypy src/remnant

test-fast: $(COMPILED)
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# Files go to the workers in collection order (not largest-first): the end-to-end file that builds the shared SmolLM2
# states comes first and the files that read them just before tests/unit/ (tests/conftest.py FIRST_FILES,
# STATE_READERS), so one worker builds the states while the other runs what needs none.
# lint, mypy and the bytecode run two at a time (mypy uses one core).
test: $(STAMP)
	@$(MAKE) --no-print-directory -j2 lint typecheck $(COMPILED)
	$(BIN)/python -m pytest -q -m "not calibration" -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# The calibration measurements (docs/latent.md): each builds its own SmolLM2 states and prints the figures docs/
# reports. Research measurements whose numbers move with training seeds, so they are kept out of `make test`.
calibrate: $(COMPILED)
	$(BIN)/python -m pytest -q -s -m calibration -p no:cacheprovider

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
