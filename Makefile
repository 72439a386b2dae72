# Two set-up commands, each works on a fresh clone:
#   make plan   plans the default example stack offline (no credentials, no Pulumi CLI)
#   make test   runs the whole test suite (first installs the programs the tests run, if missing)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STACK  ?= aws-p5-slurm
PYTEST_ARGS ?=
# Three workers per core, at most 8 (each holds ~1 GB): the slowest tests spend most of their time
# waiting on real daemons (slurmctld starts a powered-up node's job on its 30-s periodic pass), and
# a waiting worker leaves its core to the others. On 2 cores (bash .ci/run on a fresh clone,
# 2026-11-28, other work beside it): tests 22 min with 2 workers, 18.5 with 4, 16 with 6.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n * 3)); [ $$n -gt 8 ] && n=8; echo $$n)
LOCK   := requirements.lock
# uv resolves the lock (make lock); pinned so that two refreshes of the same inputs agree.
UV_VERSION := 0.13.9
PIP_VERSION := 26.3
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

.PHONY: plan test bench venv system-deps clean lock
# Serial even under -j: the system check must finish (or fail) before the venv install starts.
.NOTPARALLEL:

# Debian's and Ubuntu's python3 make venvs only with python3-venv: the script installs it if needed.
$(BIN)/python:
	@$(system_deps) --venv-only
	$(PYTHON) -m venv $(VENV)

# Exactly the versions CI tested: every dependency (pip and setuptools too) comes from
# requirements.lock, each checked against its sha256 (--require-hashes); aicluster itself is then
# installed on top without resolving anything (--no-deps, and the locked setuptools builds it).
# The stamp is rebuilt whenever pyproject.toml or the lock changes, so dependency edits reinstall.
$(VENV)/.installed: pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed

system-deps:
	@$(system_deps)

plan: $(VENV)/.installed
	$(BIN)/aicluster plan --stack $(STACK)

# The suite runs on every core (pytest-xdist, TEST_WORKERS above); worksteal keeps the long fuzzers
# from leaving one worker alone at the end. TEST_WORKERS=0 runs it in one process.
test: system-deps $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# Plan-time scaling benchmark: writes bench/results/plan_scaling.md and .json (a few minutes).
bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scaling.py

# Refresh requirements.lock after editing the dependencies in pyproject.toml (needs PyPI): the newest
# versions within pyproject's ranges, for every Python from 3.10 and every platform, with the
# sha256 of every file PyPI serves for them. Commit the lock with the change; `make test` then
# reinstalls from it.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet uv==$(UV_VERSION)
	echo 'pip==$(PIP_VERSION)' > .lock-venv/pip.in
	.lock-venv/bin/uv pip compile pyproject.toml .lock-venv/pip.in --extra test --universal \
		--python-version 3.10 --generate-hashes --custom-compile-command "make lock" --index-url https://pypi.org/simple -o $(LOCK)
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) plan-out .pytest_cache .hypothesis
