"""Shared test support: example specs, stacks and the offline planner, imported by tests as
`from tests.support import ...`; larger helpers live in submodules (tests/support/*.py).
Fixtures stay in conftest.py files; no test module imports another test module (tests/test_test_layout.py)."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "tests" / "data" / "schemas"   # vendored third-party schemas (sources: its README.md)
STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
STACK_NAMES = [p.name[len("Pulumi."):-len(".yaml")] for p in STACK_FILES]

# The smallest valid specs per cloud; tests deep-copy and mutate them.
AWS_MIN = {
    "name": "test",
    "cloud": "aws",
    "region": "us-east-1",
    "zone": "us-east-1a",
    "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 4}],
}
GCP_MIN = {
    "name": "test",
    "cloud": "gcp",
    "region": "us-central1",
    "zone": "us-central1-a",
    "pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": 2}],
}
FSX = {"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 1200}


def slurmd_spec(name: str) -> dict:
    """One Trainium pool of two nodes: no GRES, so a slurmd on this machine (no /dev/nvidia*) can
    be its node (tests/slurm, real slurmd)."""
    return {"name": name, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "pools": [{"name": "trn", "instance_type": "trn1n.32xlarge", "max_nodes": 2}]}
GCP_PROJECT = "aicluster-test"   # the gcp:project run_spec gives GCP specs
CR = "cr-0123456789abcdef0"

BASE_SPEC = {
    "name": "demo",
    "cloud": "aws",
    "region": "us-east-1",
    "zone": "us-east-1a",
    "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 16}],
    "storage": [{"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 24000,
                 "throughput_mbps_per_tib": 500}],
    "workload": {"model_params_b": 70},
}


def stack_spec(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]["aicluster:cluster"]


def run_spec(spec: dict, stack: str = "test"):
    """Plan a spec dict through the real program (`aicluster.cluster.program`) under mocks."""
    from aicluster.cluster import program
    from aicluster.offline.engine import run_program

    config = {"aicluster:cluster": spec}
    if spec.get("cloud") == "aws":
        config["aws:region"] = spec["region"]
    if spec.get("cloud") == "gcp":
        config |= {"gcp:region": spec["region"], "gcp:project": GCP_PROJECT}
    return run_program(program, stack=stack, config=config)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
