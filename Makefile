# The two commands of README.md. Each creates .venv when missing; a stamp file keyed on pyproject.toml makes a
# second run install nothing.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
BIN := $(VENV)/bin

.PHONY: demo demo-quick test test-fast lint typecheck venv clean bench

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (README: fresh machine with Python 3.11)"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/remnant demo --quick

# Benchmarks (DESIGN §6): ratios of fast paths to their baselines, written to benchmarks/RESULTS.md.
# `make bench BENCH_ARGS=--smollm2` adds SmolLM2-135M-Instruct.
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard benchmarks)
	$(BIN)/ruff format --check src tests $(wildcard benchmarks)

# mypy --strict (pyproject.toml) on the whole package, the model edge included.
typecheck: $(STAMP)
	$(BIN)/mypy src/remnant

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# Files go to the workers in collection order (not largest-first): the slow end-to-end files come first, so the
# two that build their own model states (test_e2e_access: J-Access states; test_e2e_battery: the canary states)
# start together on the two workers instead of one waiting on the other's state lock at the end of the run.
test: lint typecheck
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
