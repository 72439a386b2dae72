"""Plans of the example stacks, each made once per test session, for the suites that judge every
stack (tests/safety, tests/security). A stack is planned with its own config (aws:region,
gcp:project, ...) and, for edits, with its spec replaced, exactly as `aicluster plan` does."""
from __future__ import annotations

import copy
import fcntl
import functools
import json
import os
import pickle
from pathlib import Path

from tests.support import STACK_NAMES  # noqa: F401  re-exported: every stack in stacks/


# Set by tests/conftest.py for the whole run: a folder every pytest-xdist worker shares, where the
# first worker to need a stack's plan leaves it (pickled) for the others.
SHARED_ENV = "AICLUSTER_TEST_SHARED"


@functools.lru_cache(maxsize=None)
def stack_result(name: str):
    """`aicluster plan --stack NAME` in-process: a PlanResult (spec, design, plan, files), made once
    per test run: per process, and across workers through the run's shared folder (a lock makes
    the others wait for the one that plans, instead of planning it again)."""
    from aicluster.commands.planner import plan_stack

    shared = os.environ.get(SHARED_ENV)
    if not shared:
        return plan_stack(name)
    folder = Path(shared) / "stack-plans"
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{name}.pickle"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        result = plan_stack(name)
        partial = saved.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(saved)
        return result


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
