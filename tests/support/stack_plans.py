"""Plans of the example stacks, each made once per test session, for the suites that judge every
stack (tests/safety, tests/security). A stack is planned with its own config (aws:region,
gcp:project, ...) and, for edits, with its spec replaced, exactly as `aicluster plan` does."""
from __future__ import annotations

import copy
import fcntl
import functools
import hashlib
import json
import os
import pickle
from pathlib import Path

from tests.support import STACK_NAMES  # noqa: F401  re-exported: every stack in stacks/


# Set by tests/conftest.py for the whole run: a folder every pytest-xdist worker shares, where the
# first worker to need a stack's plan leaves it (pickled) for the others.
SHARED_ENV = "AICLUSTER_TEST_SHARED"


def shared(key: str, compute):
    """compute() once per test run across pytest-xdist workers: the first worker to ask computes it
    and leaves it pickled in the run's shared folder; the others wait on a lock and load it. A
    failure is not kept (each asker raises its own). Without the folder (pytest not run through
    tests/conftest.py), compute() itself."""
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        return compute()
    folder = Path(folder) / "plans"
    folder.mkdir(parents=True, exist_ok=True)
    stem = hashlib.sha256(key.encode()).hexdigest()[:32]
    saved = folder / f"{stem}.pickle"
    with open(folder / f"{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        value = compute()
        partial = folder / f"{stem}.partial"
        partial.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(saved)
        return value


@functools.lru_cache(maxsize=None)
def stack_result(name: str):
    """`aicluster plan --stack NAME` in-process: a PlanResult (spec, design, plan, files), made once
    per test run (per process, and across workers: `shared`)."""
    from aicluster.commands.planner import plan_stack

    return shared(f"stack {name}", lambda: plan_stack(name))


def stack_plan(name: str):
    return stack_result(name).plan


def stack_spec_data(name: str) -> dict:
    """A deep copy of the stack's spec, as YAML gives it (tests mutate it)."""
    from aicluster.commands.stacks import read_stack

    return copy.deepcopy(read_stack(name).spec_data)


@functools.lru_cache(maxsize=256)
def _result_cached(name: str, spec_json: str):
    import tempfile
    from pathlib import Path

    import yaml
    from aicluster.commands.planner import plan_stack
    from aicluster.commands.stacks import read_stack

    config = dict(read_stack(name).config)
    config["aicluster:cluster"] = json.loads(spec_json)
    with tempfile.TemporaryDirectory(prefix="aicluster-edit-") as folder:
        path = Path(folder) / f"Pulumi.{name}.yaml"
        path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
        return plan_stack(str(path))


def result_with_spec(name: str, spec: dict):
    """`aicluster plan` of stack `name` with its spec replaced by `spec` (same stack name and
    other config, so URNs compare with the stack's own plan). SpecError for an invalid spec."""
    return _result_cached(name, json.dumps(spec, sort_keys=True))


def plan_with_spec(name: str, spec: dict):
    return result_with_spec(name, spec).plan
