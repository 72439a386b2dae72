"""ClusterSpec parsing: good specs, a table of bad ones (exact path, value, what is allowed, "did you
mean"), several problems at once, and the JSON Schema against the example stacks."""
from __future__ import annotations

import copy
import glob
import json
import os
import re

import jsonschema
import pydantic
import pytest
import yaml

from aicluster.design.cluster import design_cluster
from aicluster.errors import Problem, SpecError
from aicluster.spec.cluster import ClusterSpec, json_schema, parse_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STACKS = sorted(glob.glob(os.path.join(ROOT, "stacks", "*.yaml")))

from tests.support import AWS_MIN, CR, FSX, GCP_MIN  # noqa: E402  shared minimal specs
from tests.support.bad_specs import BAD, SUBNET, VPC, pool, spec  # noqa: E402
def problems_of(data) -> tuple[Problem, ...]:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.problems, "a SpecError must hold at least one problem"
    return info.value.problems


# --- good specs -------------------------------------------------------------------------------


def test_minimal_spec_parses_with_defaults():
    s = parse_spec(AWS_MIN)
    assert isinstance(s, ClusterSpec)
    assert s.name == "test" and s.cloud == "aws" and s.region == "us-east-1" and s.zone == "us-east-1a"
    assert s.scheduler == "slurm"
    assert s.storage == () and s.workload is None and dict(s.tags) == {}
    assert s.network.vpc_cidr is None and s.network.existing is None and s.network.ssh_ingress_cidrs == ()
    (p,) = s.pools
    assert p.name == "gpu" and p.instance_type == "p5.48xlarge" and p.max_nodes == 4
    assert p.min_nodes == 0
    assert p.capacity.type == "on-demand" and p.capacity.reservation_id is None
    assert p.efa is None and p.image is None
    assert p.root_volume_gib == 200


def test_storage_defaults():
    s = parse_spec(spec(storage=[FSX]))
    (fs,) = s.storage
    assert fs.protect is True
    assert fs.deployment_type == "PERSISTENT_2"
    assert fs.throughput_mbps_per_tib is None and fs.import_path is None


def test_spec_is_frozen():
    s = parse_spec(spec(storage=[FSX]))
    with pytest.raises(pydantic.ValidationError):
        s.name = "other"
    with pytest.raises(pydantic.ValidationError):
        s.pools[0].max_nodes = 99
    with pytest.raises(pydantic.ValidationError):
        s.storage[0].protect = False
    with pytest.raises(pydantic.ValidationError):
        s.pools[0].capacity.type = "spot"
    with pytest.raises(AttributeError):  # a tuple, not a list
        s.pools.append(s.pools[0])  # type: ignore[attr-defined]
    assert s.name == "test" and s.pools[0].max_nodes == 4


def test_capacity_string_shorthand():
    s = parse_spec(pool(capacity="spot"))
    assert s.pools[0].capacity.type == "spot"
    assert s.pools[0].capacity.reservation_id is None
    s = parse_spec(pool(capacity={"type": "spot"}))
    assert s.pools[0].capacity.type == "spot"


def test_reservation_and_capacity_block_with_ids_parse():
    s = parse_spec(pool(capacity={"type": "reservation", "reservation_id": CR}))
    assert s.pools[0].capacity.reservation_id == CR
    s = parse_spec(pool(capacity={"type": "capacity-block", "reservation_id": CR}))
    assert s.pools[0].capacity.type == "capacity-block"


@pytest.mark.parametrize("cloud_base, alias, expected", [
    (AWS_MIN, "h100", "p5.48xlarge"),
    (AWS_MIN, "H100", "p5.48xlarge"),
    (AWS_MIN, "a100", "p4d.24xlarge"),
    (AWS_MIN, "b200", "p6-b200.48xlarge"),
    (AWS_MIN, "trainium2", "trn2.48xlarge"),
    (GCP_MIN, "h100", "a3-megagpu-8g"),
    (GCP_MIN, "h200", "a3-ultragpu-8g"),
    (GCP_MIN, "b200", "a4-highgpu-8g"),
    (GCP_MIN, "a100", "a2-highgpu-8g"),
])
def test_aliases_resolve_per_cloud(cloud_base, alias, expected):
    s = parse_spec(pool(cloud_base, instance_type=alias))
    assert s.pools[0].instance_type == alias  # the spec keeps what the user wrote
    assert design_cluster(s).pools[0].instance.name == expected


def test_gcp_minimal_spec_parses():
    s = parse_spec(GCP_MIN)
    assert s.cloud == "gcp" and s.zone == "us-central1-a"


def test_existing_network_parses():
    s = parse_spec(spec(network={"existing": {"vpc_id": VPC, "subnet_id": SUBNET}}))
    assert s.network.existing.vpc_id == VPC and s.network.existing.subnet_id == SUBNET


def test_efa_false_is_accepted_and_gives_no_efa_devices():
    # Every AWS type in the catalog has EFA, so "efa: true on a type without EFA" cannot be built
    # from the catalog; the opposite direction (turning EFA off) must work.
    d = design_cluster(parse_spec(pool(efa=False)))
    (p,) = d.pools
    assert p.efa is False
    assert p.efa_devices == 0
    assert [(n.network_card_index, n.device_index, n.interface_type) for n in p.interfaces] == [(0, 0, "interface")]


# --- bad specs --------------------------------------------------------------------------------

# (id, data, path, value, fragment of `allowed`, suggestion or None when not checked)
@pytest.mark.parametrize("data, path, value, allowed, suggestion",
                         [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_spec_reports_path_value_allowed(data, path, value, allowed, suggestion):
    problems = problems_of(data)
    at_path = [p for p in problems if p.path == path]
    assert at_path, f"no problem at {path!r}; got {[str(p) for p in problems]}"
    p = next((q for q in at_path if allowed in q.allowed), at_path[0])
    assert p.value == value
    text = str(p)
    # The message names the value, where it is and what is allowed.
    assert repr(value)[:60] in text
    assert allowed in p.allowed, p.allowed
    assert (path or "<root>") in text
    if suggestion is not None:
        assert p.suggestion == suggestion
        assert f"did you mean {suggestion}?" in text


@pytest.mark.parametrize("data", [pytest.param(case[1], id=case[0]) for case in BAD])
def test_bad_spec_reports_only_that_problem(data):
    """One mistake, one problem: no knock-on noise (e.g. a list 'too short' after its item failed)."""
    problems = problems_of(data)
    assert len(problems) == 1, [str(p) for p in problems]


def test_efa_on_gcp_only_complains_about_efa():
    problems = problems_of(pool(GCP_MIN, efa=True))
    assert {p.path for p in problems} == {"pools[0].efa"}


def test_gcp_type_on_aws_names_its_cloud_and_lists_aws_types():
    (p,) = problems_of(pool(instance_type="a3-megagpu-8g"))
    assert "a3-megagpu-8g is a gcp type" in p.allowed
    assert "p5.48xlarge" in p.allowed and "h100" in p.allowed


# Tag keys that are, or become once GCP's label rule applies, a key of aicluster's own (aicluster-node
# is how the power programs find a node's instance), and keys near them that stay the user's.
RESERVED_TAG_KEYS = ["aicluster-node", "Aicluster-Node", "aicluster.node", "AICLUSTER.NODE", "aicluster:node",
                     "aicluster:pool", "aicluster@role", "aicluster+cluster", "aicluster=x", "aicluster.resume-id"]
USER_TAG_KEYS = ["aicluster_node", "aicluster", "aiclusternode", "team.aicluster-node", "my-aicluster-x",
                 "x-aicluster-node", "ai.cluster-node"]


@pytest.mark.parametrize("base", [AWS_MIN, GCP_MIN], ids=["aws", "gcp"])
@pytest.mark.parametrize("key", RESERVED_TAG_KEYS)
def test_a_tag_key_that_becomes_an_aicluster_label_is_refused_on_both_clouds(base, key):
    (p,) = problems_of(spec(base, tags={key: "x"}))
    assert (p.path, p.value) == (f"tags.{key}", key)
    assert "aicluster- (reserved" in p.allowed and "aicluster-node" in p.allowed
    if key != "aicluster-node":
        from aicluster.spec.cluster import _gcp_label_key

        assert f"{key} becomes the GCP label {_gcp_label_key(key)}" in p.allowed


@pytest.mark.parametrize("base", [AWS_MIN, GCP_MIN], ids=["aws", "gcp"])
@pytest.mark.parametrize("key", USER_TAG_KEYS)
def test_tag_keys_near_the_reserved_ones_stay_the_users(base, key):
    design_cluster(parse_spec(spec(base, tags={key: "x"})))


def test_no_tag_the_spec_takes_becomes_a_gcp_label_of_aicluster():
    """The GCP components' own conversion (gcp.common.label_key), not the spec's copy of it: whatever
    key the spec takes, the labels it writes keep aicluster's own keys and values."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aicluster.gcp.common import labels, label_key

    keys = st.one_of(st.text(min_size=1, max_size=63),
                     st.builds(lambda head, sep, tail: head + sep + tail,
                               st.sampled_from(["aicluster", "AICLUSTER", "Aicluster", "aiCluster"]),
                               st.sampled_from(list("-.:@+=/_ ")), st.text("abcdefgnoprsuz-", max_size=12)))

    @settings(max_examples=300, deadline=None)
    @given(keys)
    def check(key):
        try:
            parsed = parse_spec(spec(GCP_MIN, tags={key: "x"}))
        except SpecError as exc:
            if label_key(key).startswith("aicluster-"):
                assert [p.path for p in exc.problems] == [f"tags.{key}"], [str(p) for p in exc.problems]
            return
        assert not label_key(key).startswith("aicluster-"), key
        written = labels(design_cluster(parsed), "compute", "gpu")
        assert written["aicluster-cluster"] == "test" and written["aicluster-pool"] == "gpu", written
        assert written["aicluster-role"] == "compute" and "aicluster-node" not in written, written

    check()


def test_deeply_nested_value_is_a_spec_error_not_a_crash_shallow():
    x: list = []
    for _ in range(200):
        x = [x]
    problems = problems_of(spec(name=x))
    assert problems[0].path == "name"


def test_deeply_nested_value_is_a_spec_error_not_a_crash():
    x: list = []
    for _ in range(1000):
        x = [x]
    data = copy.deepcopy(AWS_MIN)
    data["name"] = x  # not through spec(): deepcopy itself cannot copy this
    problems = problems_of(data)
    assert problems[0].path == "name"


# --- several problems at once ------------------------------------------------------------------


def test_several_shape_problems_are_all_reported():
    data = {
        "name": "Bad Name",                       # name: pattern
        "cloud": "azure",                         # cloud: literal
        "region": "us-east-1",
        "zone": "us-east-1a",
        "pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": "4",  # pools[0].max_nodes: type
                   "maxnodes": 3}],               # pools[0].maxnodes: unknown
        "tagz": {},                               # tagz: unknown
    }
    with pytest.raises(SpecError) as info:
        parse_spec(data, source="stacks/Pulumi.bad.yaml")
    err = info.value
    paths = sorted(p.path for p in err.problems)
    assert paths == sorted(["name", "cloud", "pools[0].max_nodes", "pools[0].maxnodes", "tagz"])
    text = str(err)
    assert "(5 problems)" in text
    assert "stacks/Pulumi.bad.yaml" in text
    for path in paths:
        assert path in text


def test_several_meaning_problems_are_all_reported():
    data = spec(
        zone="us-west-2a",                                                     # zone
        network={"vpc_cidr": "10.0.0.1/16"},                                   # network.vpc_cidr
        pools=[{"name": "gpu", "instance_type": "p5.48xl", "max_nodes": 2},    # pools[0].instance_type
               {"name": "gpu", "instance_type": "h100", "max_nodes": 2, "min_nodes": 3}],  # name, min_nodes
        storage=[{**FSX, "mount": "/etc"}],                                    # storage[0].mount
        tags={"aws:team": "x"},                                                # tags.aws:team
    )
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    err = info.value
    expected = {"zone", "network.vpc_cidr", "pools[0].instance_type", "pools[1].name", "pools[1].min_nodes",
                "storage[0].mount", "tags.aws:team"}
    assert {p.path for p in err.problems} == expected
    assert len(err.problems) == len(expected) == 7
    text = str(err)
    assert "(7 problems)" in text
    for path in expected:
        assert path in text
    assert "Traceback" not in text


def test_spec_error_is_a_value_error_with_one_line_per_problem():
    with pytest.raises(ValueError) as info:
        parse_spec(spec(cloud="azure", scheduler="pbs"))
    lines = str(info.value).splitlines()
    assert lines[0].startswith("invalid cluster spec (2 problems)")
    assert len(lines) == 3 and all(line.startswith("  - ") for line in lines[1:])


# --- JSON Schema -------------------------------------------------------------------------------


def test_json_schema_is_valid_draft_2020_12():
    schema = json_schema()
    json.dumps(schema)  # serialisable
    jsonschema.Draft202012Validator.check_schema(schema)


def _descriptions(node, path="$"):
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            yield path, node["description"]
        for key, value in node.items():
            yield from _descriptions(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _descriptions(value, f"{path}[{i}]")


def test_schema_descriptions_say_which_cloud_aws_only_wording_applies_to():
    """The spec serves aws and gcp: a description that names an AWS-only thing (EKS, FSx, SSM, an
    AMI, ARNs, EFA, s3://) says it is for aws, so `aicluster schema` does not read as AWS-only."""
    aws_only = re.compile(r"\b(EKS|FSx|SSM|AMI|ARNs?|EFA)\b|s3://")
    schema = json_schema()
    unscoped = [f"{path}: {text}" for path, text in _descriptions(schema)
                if aws_only.search(text) and not re.search(r"\baws\b", text, re.I)]
    assert not unscoped, unscoped
    kubernetes = schema["properties"]["kubernetes"]["description"]
    assert "EKS" in kubernetes and "GKE" in kubernetes, kubernetes


def test_there_are_example_stacks():
    assert STACKS, "stacks/*.yaml should hold example stacks"


@pytest.mark.parametrize("path", STACKS, ids=[os.path.basename(p) for p in STACKS])
def test_example_stack_validates_against_schema_and_parses(path):
    with open(path, encoding="utf-8") as fh:
        cluster = yaml.safe_load(fh)["config"]["aicluster:cluster"]
    validator = jsonschema.Draft202012Validator(json_schema())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(cluster)]
    assert errors == []
    design_cluster(parse_spec(cluster, source=path))


def test_schema_rejects_unknown_keys():
    validator = jsonschema.Draft202012Validator(json_schema())
    assert not validator.is_valid(spec(tagz={}))
    assert not validator.is_valid(pool(maxnodes=3))


def test_schema_accepts_capacity_shorthand():
    """parse_spec accepts `capacity: spot`; the schema must too, and refuse a kind that is not one."""
    validator = jsonschema.Draft202012Validator(json_schema())
    for kind in ("spot", "on-demand"):
        data = pool(capacity=kind)
        parse_spec(data)
        validator.validate(data)
    assert not validator.is_valid(pool(capacity="spots"))


VALID_FOR_SCHEMA = [
    AWS_MIN,
    GCP_MIN,
    pool(capacity={"type": "reservation", "reservation_id": CR}),
    spec(network={"existing": {"vpc_id": VPC, "subnet_id": SUBNET}, "ssh_ingress_cidrs": ["203.0.113.0/24"]}),
    spec(storage=[FSX, {**FSX, "name": "data", "mount": "/data", "deployment_type": "SCRATCH_2"}],
         workload={"model_params_b": 7}, tags={"team": "ml"}, scheduler="kubernetes", kubernetes={"api_access": "vpc"}),
]


@pytest.mark.parametrize("data", VALID_FOR_SCHEMA)
def test_every_accepted_spec_validates_against_schema(data):
    parse_spec(data)
    jsonschema.Draft202012Validator(json_schema()).validate(data)
