"""Plans of the example stacks, each made once per test session, for the suites that judge every
stack (tests/safety, tests/security). A stack is planned with its own config (aws:region,
gcp:project, ...) and, for edits, with its spec replaced, exactly as `aicluster plan` does."""
from __future__ import annotations

import copy
import functools
import json

from tests.support import STACK_NAMES  # noqa: F401  re-exported: every stack in stacks/
from tests.support.run_cache import shared


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
