# Two set-up commands, each works on a fresh clone:
#   make plan   plans the default example stack offline (no credentials, no Pulumi CLI)
#   make test   runs the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STACK  ?= aws-p5-slurm
PYTEST_ARGS ?=

.PHONY: plan test bench venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The stamp is rebuilt whenever pyproject.toml changes, so dependency edits reinstall.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

plan: $(VENV)/.installed
	$(BIN)/aicluster plan --stack $(STACK)

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Plan-time scaling benchmark: writes bench/results/plan_scaling.md and .json (a few minutes).
bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scaling.py

clean:
	rm -rf $(VENV) plan-out .pytest_cache .hypothesis
