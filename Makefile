# Two set-up commands, each works on a fresh clone:
#   make plan   plans the default example stack offline (no credentials, no Pulumi CLI)
#   make test   runs the whole test suite (first installs the programs the tests run, if missing)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STACK  ?= aws-p5-slurm
PYTEST_ARGS ?=
# The programs the tests run for real (shellcheck, cloud-init, Slurm, munge, MariaDB, openssl, curl), before anything else:
#   install  (default) install the missing ones with apt-get (sudo when not root), or fail at once
#            with the command to run
#   check    fail at once with that command instead of installing
#   skip     do not look (a subset of the tests on a machine without them, e.g. PYTEST_ARGS=tests/test_spec.py)
SYSTEM_DEPS ?= install

ifeq ($(SYSTEM_DEPS),install)
system_deps = PYTHON='$(PYTHON)' .ci/install-system-deps
else ifeq ($(SYSTEM_DEPS),check)
system_deps = PYTHON='$(PYTHON)' .ci/install-system-deps --check-only
else ifeq ($(SYSTEM_DEPS),skip)
system_deps = :
else
$(error SYSTEM_DEPS must be install, check or skip, not '$(SYSTEM_DEPS)')
endif

.PHONY: plan test bench venv system-deps clean
# Serial even under -j: the system check must finish (or fail) before the venv install starts.
.NOTPARALLEL:

# Debian's and Ubuntu's python3 make venvs only with python3-venv: the script installs it if needed.
$(BIN)/python:
	@$(system_deps) --venv-only
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The stamp is rebuilt whenever pyproject.toml changes, so dependency edits reinstall.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

system-deps:
	@$(system_deps)

plan: $(VENV)/.installed
	$(BIN)/aicluster plan --stack $(STACK)

test: system-deps $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Plan-time scaling benchmark: writes bench/results/plan_scaling.md and .json (a few minutes).
bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scaling.py

clean:
	rm -rf $(VENV) plan-out .pytest_cache .hypothesis
