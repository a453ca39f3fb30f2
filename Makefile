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

# Byte-compile the project's modules: with PYTHONDONTWRITEBYTECODE set (as on some CI machines)
# Python never writes them, and every command compiled some 50 modules anew (0.15 s each time).
COMPILE := $(BIN)/python -m compileall -q -j 0 hindsight instrument apps replay validation predict
# Compile the kernels of the everyday commands ahead of time (hindsight/jit.py), so that they run
# without importing numba: nothing to do when the description of the sources as they are exists.
AOT := $(BIN)/python -m hindsight.aot_build

demo: $(STAMP)
	$(COMPILE)
	$(AOT)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/hindsight demo

test: $(STAMP)
	$(COMPILE)
	$(AOT)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(COMPILE)
	$(AOT)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/instrument_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info traces/demo hindsight/__pycache__/aot-* hindsight/interop/build \
	    instrument/pmpi/build
