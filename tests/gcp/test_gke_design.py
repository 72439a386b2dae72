"""TPU pools and the GKE design, pure (no Pulumi): slice shapes against the catalog and Google's
published host counts, the spec's TPU rules, and what the GKE design decides before any cloud
output exists (pod and service ranges, device network names, node pool names, Kueue groups)."""
from __future__ import annotations

import copy
import ipaddress
import math

import pytest

from aicluster.catalog import load_catalog
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.design.gke import MAX_NODES, NETWORK_NAME_LIMIT
from aicluster.design.kubernetes import GPU_RESOURCE, TPU_RESOURCE
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN

TPUS = load_catalog().tpus


def tpu_spec(gen="v5p", topology="4x4x4", max_nodes=16, scheduler="kubernetes", **pool_extra) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec["scheduler"] = scheduler
    spec["pools"] = [{"name": "tpu", "tpu": {"type": gen, "topology": topology}, "max_nodes": max_nodes, **pool_extra}]
    return spec


def gke_spec(*pools, **top) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update({"scheduler": "kubernetes", "pools": list(pools), **top})
    return spec


def problems(data) -> list:
    with pytest.raises(SpecError) as info:
        design_cluster(parse_spec(data))
    return info.value.problems


# --- TPU slices ------------------------------------------------------------------------------------

# (generation, topology) -> (chips, hosts, machine type) as the Cloud TPU docs publish them:
# tpu/docs/v5p (2x2x2: 8 chips, 2 hosts; 4x4x4: 64 chips, 16 hosts of ct5p-hightpu-4t), GKE's TPU
# tables (v5e 4x8: 32 chips on 8 nodes of ct5lp-hightpu-4t) and tpu/docs/v6e (8x8: 64 chips on 16
# VMs of ct6e-standard-4t).
PUBLISHED = {
    ("v5p", "2x2x2"): (8, 2, "ct5p-hightpu-4t"),
    ("v5p", "4x4x4"): (64, 16, "ct5p-hightpu-4t"),
    ("v5e", "4x8"): (32, 8, "ct5lp-hightpu-4t"),
    ("v6e", "8x8"): (64, 16, "ct6e-standard-4t"),
    ("v5p", "2x2x1"): (4, 1, "ct5p-hightpu-4t"),       # single host
    ("v5e", "2x4"): (8, 1, "ct5lp-hightpu-8t"),
}


@pytest.mark.parametrize("gen, topology", sorted(PUBLISHED))
def test_tpu_topology_gives_the_published_chips_hosts_and_machine_type(gen, topology):
    chips, hosts, machine = PUBLISHED[(gen, topology)]
    assert math.prod(int(d) for d in topology.split("x")) == chips
    pool = design_cluster(parse_spec(tpu_spec(gen, topology, max_nodes=hosts))).pools[0]
    assert (pool.tpu.chips, pool.tpu.hosts, pool.tpu.machine_type) == (chips, hosts, machine)
    assert pool.instance.name == machine and pool.instance.accelerator_count == chips // hosts
    assert pool.instance.accelerator.kind == "tpu" and pool.slices == 1
    assert pool.hostlist == (f"tpu-[1-{hosts}]" if hosts > 1 else "tpu-1")


def test_multislice_is_whole_slices_of_hosts():
    pool = design_cluster(parse_spec(tpu_spec(max_nodes=48))).pools[0]
    assert pool.slices == 3 and pool.accelerators == 3 * 64
    gke = design_cluster(parse_spec(tpu_spec(max_nodes=48, min_nodes=16))).kubernetes.gke.node_pool("tpu")
    assert gke.names == ("tpu-0", "tpu-1", "tpu-2")
    # The first min_nodes / 16 slices always on, the others scale from 0 to a whole slice.
    assert gke.slice_sizes() == [("tpu-0", 16, 16), ("tpu-1", 0, 16), ("tpu-2", 0, 16)]


def test_invalid_topology_lists_the_allowed_shapes():
    (p,) = problems(tpu_spec("v5p", "3x3x3"))
    assert p.path == "pools[0].tpu.topology" and p.value == "3x3x3"
    assert "2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4" in p.allowed and "16x16x24" in p.allowed
    assert all(shape in p.allowed for shape in TPUS["v5p"].topologies)
    (p,) = problems(tpu_spec("v6e", "4x4x4"))          # a 3D shape on a 2D generation
    assert p.path == "pools[0].tpu.topology" and "2D" in p.allowed and "8x8" in p.allowed


@pytest.mark.parametrize("mutate, path, allowed", [
    (lambda s: s.update(cloud="aws", region="us-east-1", zone="us-east-1a"), "pools[0].tpu", "GCP-only"),
    (lambda s: s["pools"][0].update(instance_type="h100"), "pools[0].tpu", "either instance_type or tpu"),
    (lambda s: s["pools"][0].pop("tpu"), "pools[0].instance_type", "this key is required"),
    (lambda s: s["pools"][0]["tpu"].update(type="v5"), "pools[0].tpu.type", "a TPU generation"),
    (lambda s: s["pools"][0].update(max_nodes=20), "pools[0].max_nodes", "a multiple of 16"),
    (lambda s: s["pools"][0].update(min_nodes=4), "pools[0].min_nodes", "a multiple of 16"),
    (lambda s: s["pools"][0].update(capacity="flex-start"), "pools[0].capacity.type", "on-demand, spot or reservation"),
    (lambda s: s["pools"][0].update(image="projects/p/global/images/family/x"), "pools[0].image", "leave it out"),
])
def test_tpu_spec_mistakes_are_spec_errors(mutate, path, allowed):
    spec = tpu_spec()
    mutate(spec)
    found = problems(spec)
    assert any(p.path == path and allowed in p.allowed for p in found), found


def test_whole_slices_suggest_the_nearest_sizes_and_a_tpu_name_as_instance_type_says_how():
    (p,) = problems(tpu_spec(max_nodes=20))
    assert p.suggestion == "16 or 32"
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"][0]["instance_type"] = "v5p-128"
    (p,) = problems(spec)
    assert "tpu: {type: v5p, topology: 4x4x4}" in p.allowed


# --- GKE design -----------------------------------------------------------------------------------


@pytest.mark.parametrize("vpc", [None, "10.0.0.0/16", "172.16.0.0/20", "192.168.0.0/24", "10.4.0.0/16", "10.0.0.0/16"])
def test_pod_and_service_ranges_overlap_no_network_of_the_cluster(vpc):
    spec = gke_spec({"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 4})
    if vpc:
        spec["network"] = {"vpc_cidr": vpc}
    d = design_cluster(parse_spec(spec))
    pods, services = (ipaddress.ip_network(c) for c in (d.kubernetes.gke.pods_cidr, d.kubernetes.gke.services_cidr))
    taken = [ipaddress.ip_network(d.network.vpc_cidr), ipaddress.ip_network(d.network.service_cidr)]
    taken += [ipaddress.ip_network(s.cidr) for f in d.network.fabric_networks for s in f.subnets]
    assert not pods.overlaps(services)
    for block in taken:
        assert not pods.overlaps(block) and not services.overlaps(block), (block, pods, services)
    assert pods.prefixlen == 14 and pods.is_private and services.is_private


def test_ranges_do_not_follow_the_pools():
    """A pod range that followed the pools would replace the cluster on a routine edit."""
    small = design_cluster(parse_spec(gke_spec({"name": "gpu", "instance_type": "h100", "max_nodes": 2}))).kubernetes.gke
    big = design_cluster(parse_spec(gke_spec({"name": "gpu", "instance_type": "h200", "max_nodes": 512},
                                             {"name": "tpu", "tpu": {"type": "v5e", "topology": "8x8"}, "max_nodes": 32})))
    assert (small.pods_cidr, small.services_cidr) == (big.kubernetes.gke.pods_cidr, big.kubernetes.gke.services_cidr)


@pytest.mark.parametrize("machine, networks", [
    ("a3-highgpu-8g", [("tcpx-1", "NetDevice", "eth1", True), ("tcpx-2", "NetDevice", "eth2", True),
                       ("tcpx-3", "NetDevice", "eth3", True), ("tcpx-4", "NetDevice", "eth4", True)]),
    ("a3-megagpu-8g", [(f"tcpxo-{i}", "NetDevice", f"eth{i}", True) for i in range(1, 9)]),
    ("a3-ultragpu-8g", [("gvnic-1", "NetDevice", "eth1", False)] + [(f"rdma-{i}", "RDMA", f"eth{i + 2}", True)
                                                                     for i in range(8)]),
    ("a4-highgpu-8g", [("gvnic-1", "NetDevice", "eth1", False)] + [(f"rdma-{i}", "RDMA", f"eth{i + 2}", True)
                                                                   for i in range(8)]),
    ("a2-highgpu-8g", []),
])
def test_every_gpu_nic_network_is_an_additional_node_network(machine, networks):
    d = design_cluster(parse_spec(gke_spec({"name": "gpu", "instance_type": machine, "max_nodes": 4})))
    pool = d.kubernetes.gke.node_pool("gpu")
    assert [(n.name, n.device_mode, n.interface, n.gpu) for n in pool.networks] == networks
    itype = load_catalog().instance_types["gcp"][machine]
    assert len(pool.networks) == itype.host_nics - 1 + itype.gpu_nics     # every NIC but the node's own
    assert all(len(n.name) <= NETWORK_NAME_LIMIT for n in pool.networks)


def test_device_network_names_stay_within_gke_limit_with_the_longest_names():
    d = design_cluster(parse_spec(gke_spec({"name": "p" * 24, "instance_type": "a3-ultragpu-8g", "max_nodes": 2},
                                           name="c" * 32)))
    assert all(len(n.name) <= NETWORK_NAME_LIMIT for n in d.kubernetes.gke.networks)
    assert len({n.name for n in d.kubernetes.gke.networks}) == len(d.kubernetes.gke.networks) == 9


def test_pools_of_one_family_share_their_networks():
    d = design_cluster(parse_spec(gke_spec({"name": "a", "instance_type": "a3-ultragpu-8g", "max_nodes": 2},
                                           {"name": "b", "instance_type": "a4-highgpu-8g", "max_nodes": 2},
                                           {"name": "c", "instance_type": "a3-megagpu-8g", "max_nodes": 2})))
    assert [n.name for n in d.kubernetes.gke.networks] == ["gvnic-1", *(f"rdma-{i}" for i in range(8)),
                                                           *(f"tcpxo-{i}" for i in range(1, 9))]
    assert d.kubernetes.gke.nic_stacks == ("rdma", "tcpxo")


def test_kueue_groups_gpus_and_tpu_chips_with_the_pools_totals():
    d = design_cluster(parse_spec(gke_spec({"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 4},
                                           {"name": "tpu", "tpu": {"type": "v5p", "topology": "4x4x4"},
                                            "max_nodes": 32})))
    gpu_group, tpu_group = d.kubernetes.resource_groups
    assert gpu_group.resources == ("cpu", "memory", GPU_RESOURCE) and [p.name for p in gpu_group.pools] == ["gpu"]
    assert tpu_group.resources == (TPU_RESOURCE,) and [p.name for p in tpu_group.pools] == ["tpu"]
    tpu = d.kubernetes.pool("tpu")
    assert tpu.quota[TPU_RESOURCE] == str(2 * 64) and tpu.worker_resources == {TPU_RESOURCE: "4"}
    gpu = d.kubernetes.pool("gpu")
    assert gpu.quota[GPU_RESOURCE] == "32" and gpu.quota["cpu"] == str(208 * 4)


def test_a_gpu_pool_of_unknown_memory_leaves_memory_out_of_the_queue():
    """a4-highgpu-8g's memory is not in the catalog: no memory quota or request is made up."""
    d = design_cluster(parse_spec(gke_spec({"name": "b200", "instance_type": "a4-highgpu-8g", "max_nodes": 2})))
    (group,) = d.kubernetes.resource_groups
    assert group.resources == ("cpu", GPU_RESOURCE)
    assert "memory" not in d.kubernetes.pool("b200").worker_resources


@pytest.mark.parametrize("extra, path, allowed", [
    ({"kubernetes": {"gpu_devices": "gpu-operator"}}, "kubernetes.gpu_devices", "GKE installs"),
    ({"kubernetes": {"admins": ["arn:aws:iam::123456789012:role/x"]}}, "kubernetes.admins", "IAM"),
    ({"kubernetes": {"control_plane_zone": "us-central1-b"}}, "kubernetes.control_plane_zone", "regional"),
    ({"kubernetes": {"system_nodes": {"instance_type": "m7i.xlarge"}}}, "kubernetes.system_nodes.instance_type",
     "a gcp controller type"),
    ({"kubernetes": {"api_access_cidrs": ["0.0.0.0/0"]}}, "kubernetes.api_access_cidrs[0]", "named CIDRs"),
    ({"pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": 2,
                 "image": "projects/p/global/images/family/x"}]}, "pools[0].image", "Container-Optimized OS"),
    ({"pools": [{"name": "system", "instance_type": "h100", "max_nodes": 2}]}, "pools[0].name", "system node pool"),
    ({"pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": MAX_NODES}]}, "pools", f"at most {MAX_NODES}"),
])
def test_gke_spec_mistakes_are_spec_errors(extra, path, allowed):
    spec = gke_spec({"name": "gpu", "instance_type": "h100", "max_nodes": 2})
    spec.update(extra)
    found = problems(spec)
    assert any(p.path == path and allowed in p.allowed for p in found), found


def test_a3_high_needs_no_image_on_gke():
    """On Slurm a3-highgpu-8g needs a TCPX image; GKE's COS nodes carry TCPX themselves."""
    design_cluster(parse_spec(gke_spec({"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 2})))
    spec = gke_spec({"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 2}, scheduler="slurm")
    assert any(p.path == "pools[0].image" for p in problems(spec))


def test_balance_counts_tpu_chips_hbm_and_tflops_from_the_catalog():
    """One v5p 4x4x4 slice: 64 chips x 459 TFLOPS and 95 GiB (tpu/docs/v5p); ICI is no NIC fabric."""
    from aicluster.design.balance import from_design

    d = design_cluster(parse_spec(tpu_spec(max_nodes=32)))
    b = from_design(d)
    (pool,) = b.pools
    assert (pool.nodes, pool.accelerators, pool.accelerator_kind) == (32, 128, "tpu")
    assert pool.bf16_pflops == pytest.approx(128 * 459 / 1000)
    assert pool.hbm_gib == pytest.approx(128 * 95)
    assert not [f for f in b.findings if "fabric" in f]
