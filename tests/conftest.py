"""Shared fixtures: example specs and an offline planner that runs the real program under mocks."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture
def base_spec() -> dict:
    """A valid 16 x p5.48xlarge spec; tests mutate their own deep copy."""
    return copy.deepcopy(BASE_SPEC)


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


@pytest.fixture
def plan_spec():
    return run_spec


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint():
    """moto's server on loopback (EC2, S3, Secrets Manager), for scripts run as subprocesses."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def pytest_collection_finish(session):
    """Fewer, cheaper garbage collections: a test session builds thousands of plans, and every
    full collection walks every SDK object loaded so far (the suite ran ~40 % faster this way).
    Nothing loaded at collection time is garbage; cycles made later are still collected."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
