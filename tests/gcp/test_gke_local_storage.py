"""Local storage and image pulls of GPU nodes, under mocks: GKE GPU node pools give the machine's
bundled Local SSDs (count from catalog/node_local.yaml) to ephemeral storage as RAID0 and stream
images (gcfs_config, with the Container File System API on before any node pool); EKS GPU nodes
keep their RAID0 instance store (nodeadm localStorage) for containerd and the kubelet."""
from __future__ import annotations

import copy
import email

import pytest
import yaml

from aicluster.catalog.node_local import local_nvme
from tests.support import BASE_SPEC, GCP_MIN, run_spec

NODE_POOL = "gcp:container/nodePool:NodePool"
SERVICE = "gcp:projects/service:Service"


def gke_plan(machine: str, **pool):
    spec = copy.deepcopy(GCP_MIN)
    spec.update({"scheduler": "kubernetes", "pools": [{"name": "gpu", "instance_type": machine, "max_nodes": 2, **pool}]})
    return run_spec(spec)


def gpu_pool(plan):
    return next(p for p in plan.of_type(NODE_POOL) if p.inputs["name"] == "gpu")


@pytest.mark.parametrize("machine, ssds", [("a3-ultragpu-8g", 32), ("a4-highgpu-8g", 32), ("a3-megagpu-8g", 16),
                                           ("a3-highgpu-8g", 16), ("a2-highgpu-8g", 0)])
def test_gpu_pools_give_their_bundled_local_ssds_to_ephemeral_storage(machine, ssds):
    plan = gke_plan(machine)
    config = gpu_pool(plan).inputs["nodeConfig"]
    nvme = local_nvme(machine)
    assert (nvme.devices if nvme else 0) == ssds       # the catalog's count, Cluster Toolkit's too
    if ssds:
        assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": ssds}
    else:
        assert "ephemeralStorageLocalSsdConfig" not in config
    assert config["gcfsConfig"] == {"enabled": True}


def test_tpu_pools_stream_images_and_take_no_local_ssd():
    spec = copy.deepcopy(GCP_MIN)
    spec.update({"scheduler": "kubernetes", "pools": [
        {"name": "tpu", "tpu": {"type": "v5p", "topology": "2x2x2"}, "max_nodes": 2}]})
    for pool in run_spec(spec).of_type(NODE_POOL):
        if pool.inputs["name"] != "system":
            assert pool.inputs["nodeConfig"]["gcfsConfig"] == {"enabled": True}
            assert "ephemeralStorageLocalSsdConfig" not in pool.inputs["nodeConfig"]


def test_image_streaming_api_is_on_before_the_node_pools():
    plan = gke_plan("a3-ultragpu-8g")
    # The Monitoring and Logging APIs are enabled too (gcp/observability.py).
    (api,) = [s for s in plan.of_type(SERVICE) if s.inputs["service"] == "containerfilesystem.googleapis.com"]
    assert api.inputs["disableOnDestroy"] is False      # other workloads of the project may stream images too
    assert api.urn in gpu_pool(plan).dependencies


def test_the_plan_says_local_ssd_and_image_streaming():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    report = "\n".join(text(stack_result("gcp-a3ultra-gke")))
    assert "32 local SSDs as RAID0 ephemeral storage, image streaming" in report


def _node_config(user_data: str) -> dict:
    message = email.message_from_string(user_data)
    for part in message.walk():
        if part.get_content_type() == "application/node.eks.aws":
            return yaml.safe_load(part.get_payload())
    raise AssertionError("no nodeadm NodeConfig part")


@pytest.mark.parametrize("instance, raid", [("p5.48xlarge", True), ("p4d.24xlarge", True)])
def test_eks_gpu_nodes_keep_their_raid0_instance_store(instance, raid):
    from aicluster.aws.eks_nodes import eks_node_user_data
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    spec = copy.deepcopy(BASE_SPEC)
    spec.update({"scheduler": "kubernetes", "kubernetes": {"api_access": "vpc"},
                 "pools": [{"name": "gpu", "instance_type": instance, "max_nodes": 2}]})
    config = _node_config(eks_node_user_data(design_cluster(parse_spec(spec)), "gpu"))
    assert (config["spec"].get("instance", {}).get("localStorage") == {"strategy": "RAID0"}) is raid
