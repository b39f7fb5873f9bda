# Set-up and everyday commands. Everything runs inside .venv, created on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench notebooks clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,demos]'
	touch $@

demo: $(BIN)/.installed   ## set up, then run the main demo
	$(BIN)/python -m demos.train_charlm

test: $(BIN)/.installed   ## set up, then run the whole test suite
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks.train_step

notebooks: $(BIN)/.installed   ## every lesson as a .ipynb (made from its script) in out/notebooks/
	$(BIN)/pip install -q -e '.[notebooks]'
	$(BIN)/python -m demos.make_notebooks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
