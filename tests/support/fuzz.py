"""The spec fuzzer's inputs (valid specs, JSON values, mutated specs) and the planner's property,
shared by tests/test_fuzz_spec.py, tests/safety/test_fuzz_plan.py and tests/gcp/test_gke_fuzz.py."""
from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from aicluster.errors import SpecError

EXAMPLES = int(os.environ.get("AICLUSTER_FUZZ_EXAMPLES", 300))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

VALID_SPECS = [
    {
        "name": "p5-train",
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "scheduler": "slurm",
        "network": {"vpc_cidr": "10.0.0.0/16", "ssh_ingress_cidrs": ["203.0.113.0/24"]},
        "pools": [
            {"name": "gpu", "instance_type": "p5.48xlarge", "min_nodes": 1, "max_nodes": 16,
             "capacity": "spot", "efa": True, "root_volume_gib": 300},
            {"name": "trn", "instance_type": "trainium2", "max_nodes": 4,
             "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
             "image": "ami-0123456789abcdef0"},
        ],
        "storage": [
            {"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 24000,
             "throughput_mbps_per_tib": 500, "deployment_type": "PERSISTENT_2",
             "import_path": "s3://example-bucket/data", "protect": True},
            {"name": "scratch", "type": "lustre", "mount": "/scratch", "capacity_gib": 3600,
             "deployment_type": "SCRATCH_1"},
        ],
        "workload": {"model_params_b": 70, "checkpoint_interval_min": 30, "max_checkpoint_stall_pct": 5},
        "tags": {"team": "ml-platform"},
    },
    {
        "name": "existing-net",
        "cloud": "aws",
        "region": "us-west-2",
        "zone": "us-west-2b",
        "network": {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}},
        "pools": [{"name": "a100", "instance_type": "a100", "max_nodes": 1, "efa": False,
                   "capacity": {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}}],
    },
    {
        "name": "gke-h200",
        "cloud": "gcp",
        "region": "us-central1",
        "zone": "us-central1-a",
        "scheduler": "kubernetes",
        "network": {"vpc_cidr": "172.16.0.0/20"},
        "pools": [{"name": "h200", "instance_type": "h200", "min_nodes": 0, "max_nodes": 8,
                   "capacity": {"type": "reservation", "reservation_id": "dense-res"}}],
        "storage": [{"name": "lustre", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000,
                     "import_path": "gs://example-bucket/data"}],
        "tags": {"env": "dev"},
    },
]


# Values a YAML/JSON loader (or Pulumi config) can hand over, with the awkward corners weighted in.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 1, 2, 75, 1200, 2400, 3000, 100_000, 100_001, 2**31, 2**63, -(2**63), 10**100]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 1e308, 4.0, 0.5]),
    st.text(max_size=40),
    st.sampled_from(["", " ", "aws", "gcp", "h100", "p5.48xlarge", "spot", "reservation", "capacity-block",
                     "10.0.0.0/16", "10.0.0.1/16", "::/0", "0.0.0.0/0", "/", "/fsx", "/usr", "//",
                     "s3://b", "gs://bucket", "cr-0123456789abcdef0", "vpc-0123456789abcdef0",
                     "us-east-1", "us-east-1a", "us-central1", "us-central1-a", "aws:x", "\x00", "\u0661",
                     "a" * 300, "PERSISTENT_2", "SCRATCH_2", "lustre", "true", "null"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=12), children, max_size=5),
        st.dictionaries(st.sampled_from(["name", "cloud", "region", "zone", "pools", "storage", "network",
                                         "tags", "workload", "max_nodes", "min_nodes", "instance_type",
                                         "capacity", "type", "mount", "capacity_gib"]),
                        children, max_size=5),
    ),
    max_leaves=25,
)
extremes = st.sampled_from([0, -1, -(10**30), 10**30, 2**63, float("nan"), float("inf"), float("-inf"),
                            1e-300, True, False, None, "", [], {}])


def json_paths(node, prefix=()):
    """Every path into a JSON-like value, containers included (the root is ())."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from json_paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from json_paths(value, prefix + (i,))


def _fresh(draw, strategy):
    """A drawn value that later mutations may change without touching the strategy's own objects
    (sampled_from hands out the same [] and {} every time)."""
    return copy.deepcopy(draw(strategy))


def value_at(node, path):
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated_specs(draw):
    data = copy.deepcopy(draw(st.sampled_from(VALID_SPECS)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["drop", "replace", "extreme", "unknown-key", "gcp", "aws", "duplicate",
                                   "numbers", "empty"]))
        paths = [p for p in json_paths(data) if p]
        if op == "gcp" or op == "aws":
            if isinstance(data, dict):
                data["cloud"] = op
            continue
        if not paths:
            data = _fresh(draw, json_values)
            continue
        path = draw(st.sampled_from(paths))
        parent = value_at(data, path[:-1])
        key = path[-1]
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = _fresh(draw, json_values)
        elif op == "extreme":
            parent[key] = _fresh(draw, extremes)
        elif op == "unknown-key":
            target = parent[key] if isinstance(parent[key], dict) else parent
            if isinstance(target, dict):
                target[draw(st.text(min_size=1, max_size=12))] = _fresh(draw, json_values)
        elif op == "duplicate":
            if isinstance(parent, list):
                parent.append(copy.deepcopy(parent[key]))
        elif op == "numbers":  # every number in the spec pushed to an extreme
            for p in list(json_paths(data)):
                if p and isinstance(value_at(data, p), (int, float)) and not isinstance(value_at(data, p), bool):
                    value_at(data, p[:-1])[p[-1]] = _fresh(draw, extremes)
        elif op == "empty":
            value = parent[key]
            if isinstance(value, (list, dict, str)):
                parent[key] = type(value)()
    return data


@contextlib.contextmanager
def spec_file(data):
    """`data` as a bare spec YAML file, as a user would write it."""
    with tempfile.TemporaryDirectory(prefix="aicluster-fuzz-") as folder:
        path = Path(folder) / "cluster.yaml"
        try:
            path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
        except (yaml.YAMLError, UnicodeEncodeError):   # not representable as YAML: nothing a user can write
            path.write_text(json.dumps(data, default=str), encoding="utf-8")
        yield str(path)


def plan_or_spec_error(path: str):
    """plan_stack (what `aicluster plan FILE` runs): a PlanResult or a SpecError, nothing else."""
    from aicluster.commands.planner import plan_stack

    try:
        result = plan_stack(path)
    except SpecError as err:
        assert err.problems and str(err).strip() and "Traceback" not in str(err)
        for problem in err.problems:
            assert isinstance(problem.path, str) and problem.allowed
        return err
    assert result.plan.custom_resources(), "a valid spec plans at least one resource"
    for name, content in result.files.items():
        if name.startswith("user-data/") and name.endswith(".yaml"):
            assert content.startswith("#cloud-config"), name
            assert isinstance(yaml.safe_load(content), dict), f"{name} does not parse as YAML"
        elif name.endswith(".json"):
            json.loads(content)
    return result
