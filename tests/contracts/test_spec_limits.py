"""A routine spec edit that would cross a cloud limit ends in a SpecError at the right path, saying
what is allowed, before anything is planned.

Each spec string flows into names with a tighter limit downstream; the spec's own caps are what keep
them inside (test_limits.py plans every stack at exactly these caps, the `+max` variants):
- name (32): IAM roles <name>-slurm-head-role + Pulumi's 8-character suffix (64), S3 buckets (63),
  EKS node groups <name>-<pool> (63), GKE clusters (40), GCP service accounts (30, shortened with a
  digest), Route 53 / Cloud DNS zones <name>.aicluster.internal (labels of 63);
- pools[].name (24): node names <pool>-<n> (DNS labels of 63), EKS node groups and GKE node pools,
  Kubernetes label values (63), GCE instances <cluster>-<pool>-<n> (63, checked with max_nodes);
- storage[].name (24): Managed Lustre file system names (8) and Filestore shares (16) are derived;
- kubernetes.namespace (24): an RFC 1123 label (63);
- tags: how many fit beside aicluster's own tags (AWS 50 per resource, GCP 64 labels), and on AWS
  the alphabet every tagged service and instance-metadata tags accept.
"""
from __future__ import annotations

import copy

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.spec.cluster import AICLUSTER_TAGS, parse_spec, user_tag_budget
from tests.support import AWS_MIN, GCP_MIN
from tests.support.contract_plans import NAME_MAX, POOL_MAX

GKE_MIN = {**GCP_MIN, "scheduler": "kubernetes"}


def problems(spec: dict) -> dict[str, str]:
    """path -> what is allowed, for a spec the spec must refuse."""
    with pytest.raises(SpecError) as err:
        design_cluster(parse_spec(spec))
    return {p.path: p.allowed for p in err.value.problems}


def accepted(spec: dict) -> None:
    design_cluster(parse_spec(spec))


def with_(base: dict, **keys) -> dict:
    spec = copy.deepcopy(base)
    spec.update(keys)
    return spec


def _name(length: int) -> str:
    return ("c" + "-x" * length)[:length - 1] + "9"


@pytest.mark.parametrize("base", [AWS_MIN, GCP_MIN, GKE_MIN], ids=["aws", "gcp", "gke"])
def test_cluster_name_longer_than_its_tightest_downstream_name_is_refused(base):
    accepted(with_(base, name=_name(NAME_MAX)))
    assert "name" in problems(with_(base, name=_name(NAME_MAX + 1)))


@pytest.mark.parametrize("base", [AWS_MIN, GCP_MIN, GKE_MIN], ids=["aws", "gcp", "gke"])
def test_pool_name_longer_than_its_tightest_downstream_name_is_refused(base):
    pool = {**base["pools"][0], "name": _name(POOL_MAX)}
    accepted(with_(base, pools=[pool]))
    assert "pools[0].name" in problems(with_(base, pools=[{**pool, "name": _name(POOL_MAX + 1)}]))


def test_gcp_instance_names_count_the_node_number():
    """<cluster>-<pool>-<n> is a GCE instance name (63): a long cluster and pool name leave room for
    fewer digits, so raising max_nodes alone can cross it."""
    spec = with_(GCP_MIN, name=_name(NAME_MAX), pools=[{**GCP_MIN["pools"][0], "name": _name(POOL_MAX), "max_nodes": 99}])
    accepted(spec)                                   # 32 + 1 + 24 + 1 + 2 = 60 characters
    spec["pools"][0]["max_nodes"] = 100_000          # 64
    found = problems(spec)
    assert "pools[0].name" in found and "63" in found["pools[0].name"]


def test_storage_name_and_namespace_are_capped():
    fs = {"name": _name(POOL_MAX + 1), "type": "lustre", "mount": "/fsx", "capacity_gib": 1200}
    assert "storage[0].name" in problems(with_(AWS_MIN, storage=[fs]))
    eks = with_(AWS_MIN, scheduler="kubernetes", kubernetes={"namespace": _name(POOL_MAX + 1),
                                                              "api_access_cidrs": ["203.0.113.0/24"]})
    assert "kubernetes.namespace" in problems(eks)


@pytest.mark.parametrize("base, limit", [(AWS_MIN, 50), (GCP_MIN, 64)], ids=["aws", "gcp"])
def test_tag_count_beyond_what_remains_after_aicluster_tags_is_refused(base, limit):
    budget = user_tag_budget(base["cloud"])
    assert budget == limit - AICLUSTER_TAGS
    accepted(with_(base, tags={f"k{i}": "v" for i in range(budget)}))
    found = problems(with_(base, tags={f"k{i}": "v" for i in range(budget + 1)}))
    assert "tags" in found and f"at most {budget} tags" in found["tags"]


@pytest.mark.parametrize("key", ["cost center", "team/ml", ".", "_index", "ünï", "a,b"])
def test_aws_tag_keys_outside_the_instance_metadata_alphabet_are_refused(key):
    found = problems(with_(AWS_MIN, tags={key: "x"}))
    assert f"tags.{key}" in found and "instance-metadata" in found[f"tags.{key}"]


@pytest.mark.parametrize("value", ["{{ cluster }}", "$(reboot)", "a\nb", "'quoted'", "100%", "🚀", "a;b", "a,b"])
def test_aws_tag_values_outside_the_cross_service_alphabet_are_refused(value):
    found = problems(with_(AWS_MIN, tags={"team": value}))
    assert "tags.team" in found and "IAM" in found["tags.team"]


@pytest.mark.parametrize("tags", [{"team": "ML Platform ünïcödé"}, {"cost-center": "4711:a/b=c+d@e.f_g"},
                                  {"Team.Name": ""}, {"k:v": "x"}])
def test_aws_tags_every_service_accepts_pass(tags):
    accepted(with_(AWS_MIN, tags=tags))


def test_gcp_tags_that_would_become_one_label_are_refused():
    found = problems(with_(GCP_MIN, tags={"Team": "a", "team": "b"}))
    assert "tags.team" in found and "label team" in found["tags.team"]
    accepted(with_(GCP_MIN, tags={"cost center": "4711", "Team": "ML.Platform"}))     # lower-cased, - for the rest


def test_tag_key_and_value_lengths_stay_capped():
    assert "tags" in " ".join(problems(with_(AWS_MIN, tags={"k" * 64: "v"})))
    assert problems(with_(GCP_MIN, tags={"k": "v" * 64}))
