# Two commands set everything up: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall when the project metadata changes; editable so the source tree is what runs.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/hindsight demo

test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q

bench: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/instrument_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info traces/demo
