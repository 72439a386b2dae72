"""Property: for ANY input, design_cluster(parse_spec(x)) returns a ClusterDesign or raises SpecError.

Nothing else may escape: not KeyError, TypeError, ValueError from ipaddress, RecursionError... A
SpecError always holds at least one problem and renders as a message, never a traceback.
Set AICLUSTER_FUZZ_EXAMPLES to run more examples (CI's nightly job raises it).
"""
from __future__ import annotations

import copy
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aicluster.design import ClusterDesign, design_cluster
from aicluster.errors import SpecError
from aicluster.spec import parse_spec

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


def test_base_specs_are_valid():
    for data in VALID_SPECS:
        assert isinstance(design_cluster(parse_spec(data)), ClusterDesign)


# --- strategies ---------------------------------------------------------------------------------

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


def _paths(node, prefix=()):
    """Every path into a JSON-like value, containers included (the root is ())."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, prefix + (i,))


def _fresh(draw, strategy):
    """A drawn value that later mutations may change without touching the strategy's own objects
    (sampled_from hands out the same [] and {} every time)."""
    return copy.deepcopy(draw(strategy))


def _get(node, path):
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated_specs(draw):
    data = copy.deepcopy(draw(st.sampled_from(VALID_SPECS)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["drop", "replace", "extreme", "unknown-key", "gcp", "aws", "duplicate",
                                   "numbers", "empty"]))
        paths = [p for p in _paths(data) if p]
        if op == "gcp" or op == "aws":
            if isinstance(data, dict):
                data["cloud"] = op
            continue
        if not paths:
            data = _fresh(draw, json_values)
            continue
        path = draw(st.sampled_from(paths))
        parent = _get(data, path[:-1])
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
            for p in list(_paths(data)):
                if p and isinstance(_get(data, p), (int, float)) and not isinstance(_get(data, p), bool):
                    _get(data, p[:-1])[p[-1]] = _fresh(draw, extremes)
        elif op == "empty":
            value = parent[key]
            if isinstance(value, (list, dict, str)):
                parent[key] = type(value)()
    return data


# --- the property -------------------------------------------------------------------------------


def _design_or_spec_error(data):
    try:
        result = design_cluster(parse_spec(data))
    except SpecError as err:
        assert err.problems, "a SpecError must hold at least one problem"
        text = str(err)
        assert text.strip()
        assert "Traceback" not in text
        for problem in err.problems:
            assert isinstance(problem.path, str)
            assert isinstance(problem.allowed, str) and problem.allowed
            assert (problem.path or "<root>") in text
        return err
    assert isinstance(result, ClusterDesign)
    return result


@FUZZ
@given(json_values)
@example(None)
@example([])
@example("")
@example({})
@example(float("nan"))
def test_any_json_value_designs_or_raises_spec_error(data):
    _design_or_spec_error(data)


@FUZZ
@given(mutated_specs())
def test_mutated_spec_designs_or_raises_spec_error(data):
    _design_or_spec_error(data)


@FUZZ
@given(st.sampled_from(VALID_SPECS), st.sampled_from(["pools", "storage"]), st.integers(0, 1),
       st.sampled_from(["name", "instance_type", "min_nodes", "max_nodes", "capacity", "efa", "image",
                        "root_volume_gib", "type", "mount", "capacity_gib", "throughput_mbps_per_tib",
                        "deployment_type", "import_path", "protect"]),
       json_values)
def test_field_replaced_with_any_value(base, section, index, field, value):
    data = copy.deepcopy(base)
    items = data.get(section) or []
    if index < len(items):
        items[index][field] = copy.deepcopy(value)
    _design_or_spec_error(data)


def test_valid_spec_survives_every_single_key_drop():
    for base in VALID_SPECS:
        for path in [p for p in _paths(base) if p]:
            data = copy.deepcopy(base)
            del _get(data, path[:-1])[path[-1]]
            _design_or_spec_error(data)


def test_deeply_nested_input_raises_spec_error():
    value: list = []
    for _ in range(1000):
        value = [value]
    data = copy.deepcopy(VALID_SPECS[0])
    data["tags"] = {"team": value}
    _design_or_spec_error(data)


@pytest.mark.parametrize("depth", [50, 500])
def test_moderately_nested_input_raises_spec_error(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    data = copy.deepcopy(VALID_SPECS[0])
    data["pools"][0]["max_nodes"] = value
    assert isinstance(_design_or_spec_error(data), SpecError)


def test_nan_and_inf_in_float_fields_are_spec_errors():
    for bad in (float("nan"), float("inf"), float("-inf")):
        data = copy.deepcopy(VALID_SPECS[0])
        data["workload"]["model_params_b"] = bad
        assert isinstance(_design_or_spec_error(data), SpecError)
