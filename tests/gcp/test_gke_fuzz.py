"""Property: any GKE or TPU spec built from the awkward corners the spec allows (every GPU family and
TPU generation, topologies valid and not, node counts in and out of whole slices, every capacity,
long names, VPC ranges that crowd the pod range, public endpoints, several pools of a family)
plans or raises a clean SpecError - never a traceback - and every Kubernetes object it plans
validates against the pinned schemas (AICLUSTER_FUZZ_EXAMPLES / 20 examples, at least 10)."""
from __future__ import annotations


import jsonschema
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aicluster.catalog import load_catalog
from aicluster.errors import SpecError
from tests.support.fuzz import EXAMPLES, plan_or_spec_error, spec_file
from tests.support.manifests import rendered_manifests, validate

pytestmark = pytest.mark.filterwarnings("ignore")
TPUS = load_catalog().tpus
GPUS = ["a2-highgpu-8g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g",
        "h100", "h200", "b200"]
NAMES = ["gpu", "tpu", "system", "x" * 24, "a", "gke", "k8s", "v5p-1", "default"]


@st.composite
def tpu_pool(draw, name):
    gen = draw(st.sampled_from(sorted(TPUS)))
    topology = draw(st.sampled_from([*TPUS[gen].topologies[:6], "3x3x3", "1x1", "8x8"]))
    hosts = 16 if "x" not in topology else max(1, draw(st.sampled_from([1, 2, 4, 8, 16, 32])))
    pool = {"name": name, "tpu": {"type": gen, "topology": topology},
            "max_nodes": draw(st.sampled_from([hosts, 2 * hosts, 3, 16, 64]))}
    if draw(st.booleans()):
        pool["min_nodes"] = draw(st.sampled_from([0, hosts, 1]))
    if draw(st.booleans()):
        pool["capacity"] = draw(st.sampled_from(["spot", "flex-start", {"type": "reservation", "reservation_id": "tpu-res"}]))
    return pool


@st.composite
def gke_specs(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    pools = []
    for name in names:
        if draw(st.booleans()):
            pools.append(draw(tpu_pool(name)))
        else:
            pool = {"name": name, "instance_type": draw(st.sampled_from(GPUS)),
                    "max_nodes": draw(st.sampled_from([1, 2, 16, 512]))}
            if draw(st.booleans()):
                pool["capacity"] = draw(st.sampled_from(["spot", "flex-start", {"type": "reservation",
                                                                                "reservation_id": "dense-res"}]))
            pools.append(pool)
    spec = {"name": draw(st.sampled_from(["gke", "c" * 32, "tpu-train"])), "cloud": "gcp", "region": "us-central1",
            "zone": "us-central1-a", "scheduler": draw(st.sampled_from(["kubernetes", "kubernetes", "slurm"])),
            "pools": pools}
    if draw(st.booleans()):
        spec["network"] = {"vpc_cidr": draw(st.sampled_from(["10.0.0.0/16", "10.4.0.0/16", "172.16.0.0/20",
                                                             "192.168.0.0/24", "10.64.0.0/16"]))}
    if draw(st.booleans()):
        spec["storage"] = [{"name": "lustre", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000}]
    if spec["scheduler"] == "kubernetes" and draw(st.booleans()):
        spec["kubernetes"] = {"api_access_cidrs": ["203.0.113.0/24"], "namespace": "research"}
    return spec


@settings(max_examples=max(10, EXAMPLES // 20), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(gke_specs())
def test_gke_and_tpu_specs_plan_or_raise_spec_errors(data):
    with spec_file(data) as path:
        result = plan_or_spec_error(path)
    if isinstance(result, SpecError):
        return
    for name, docs in rendered_manifests(result.files).items():
        for doc in docs:
            try:
                validate(doc)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
                pytest.fail(f"{name}: {doc['kind']} {doc['metadata'].get('name')}: {exc}")
