"""The GCP design, pure (no Pulumi): NIC layouts per machine family derived from the catalog, the
GPU NIC networks and their addresses, placement, images, Managed Lustre and Filestore sizing, and
the spec rules that only hold on GCP."""
from __future__ import annotations

import copy
import ipaddress

import pytest

from aicluster.catalog import load_catalog
from aicluster.design.cluster import GCP_DEFAULT_MTU, design_cluster, gcp_nics
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import FSX, GCP_MIN

GCP = load_catalog().instance_types["gcp"]
TCPX_IMAGE = "projects/my-images/global/images/family/a3-tcpx"


def design(base=GCP_MIN, **changes):
    spec = copy.deepcopy(base)
    spec.update(changes)
    return design_cluster(parse_spec(spec))


def pool(instance_type, **extra):
    entry = {"name": "gpu", "instance_type": instance_type, "max_nodes": 4, **extra}
    if instance_type == "a3-highgpu-8g":
        entry.setdefault("image", TCPX_IMAGE)
    return entry


def layout(d):
    return [(n.index, n.network, n.subnet, n.nic_type, n.role) for n in d.pools[0].nics]


def spec_error(**changes) -> SpecError:
    with pytest.raises(SpecError) as err:
        design(**changes)
    return err.value


# --- golden NIC layouts --------------------------------------------------------------------------


def test_a3_high_is_one_gvnic_plus_four_tcpx_vpcs():
    d = design(pools=[pool("a3-highgpu-8g")])
    assert layout(d) == [(0, "system", 0, "GVNIC", "host")] + [
        (i, f"tcpx-{i}", 0, "GVNIC", "gpu") for i in range(1, 5)]
    assert [(n.name, n.mtu, n.roce, len(n.subnets)) for n in d.network.fabric_networks] == [
        (f"test-tcpx-{i}", 8244, False, 1) for i in range(1, 5)]


def test_a3_mega_is_one_gvnic_plus_eight_tcpxo_vpcs():
    d = design(pools=[pool("a3-megagpu-8g")])
    assert layout(d) == [(0, "system", 0, "GVNIC", "host")] + [
        (i, f"tcpxo-{i}", 0, "GVNIC", "gpu") for i in range(1, 9)]
    assert len(d.network.fabric_networks) == 8 and d.network.mtu == 8244
    assert all(not n.roce and n.firewall for n in d.network.fabric_networks)


@pytest.mark.parametrize("itype", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_rdma_types_are_two_gvnic_plus_eight_mrdma_on_one_roce_vpc(itype):
    d = design(pools=[pool(itype)])
    assert layout(d) == [(0, "system", 0, "GVNIC", "host"), (1, "gvnic-1", 0, "GVNIC", "host")] + [
        (2 + i, "rdma", i, "MRDMA", "gpu") for i in range(8)]
    gvnic, rdma = d.network.fabric_networks
    assert (gvnic.name, gvnic.mtu, gvnic.roce, len(gvnic.subnets)) == ("test-gvnic-1", 8896, False, 1)
    assert (rdma.name, rdma.mtu, rdma.roce, rdma.firewall) == ("test-rdma", 8896, True, False)
    assert [s.name for s in rdma.subnets] == [f"test-rdma-sub-{i}" for i in range(8)]
    assert d.network.mtu == 8896


def test_a2_has_only_its_system_nic():
    d = design(pools=[pool("a2-highgpu-8g")])
    assert layout(d) == [(0, "system", 0, "GVNIC", "host")]
    assert d.network.fabric_networks == () and d.network.mtu == GCP_DEFAULT_MTU


@pytest.mark.parametrize("name", sorted(GCP))
def test_layout_follows_the_catalog_for_every_type(name):
    it = GCP[name]
    nics = gcp_nics(it)
    assert len(nics) == it.host_nics + it.gpu_nics
    assert sum(n.nic_type == "MRDMA" for n in nics) == (it.gpu_nics if it.gpu_nic_stack == "rdma" else 0)
    assert [n.index for n in nics] == list(range(len(nics)))


# --- networks and addresses -------------------------------------------------------------------


def all_cidrs(d):
    return [ipaddress.ip_network(s.cidr) for n in d.network.fabric_networks for s in n.subnets]


def test_pools_of_one_family_share_networks_and_mixed_families_get_the_smallest_system_mtu():
    d = design(pools=[pool("a3-megagpu-8g"), {**pool("a3-megagpu-8g"), "name": "gpu2"},
                      {**pool("a3-ultragpu-8g"), "name": "h200"}])
    keys = [n.key for n in d.network.fabric_networks]
    assert keys == [f"tcpxo-{i}" for i in range(1, 9)] + ["gvnic-1", "rdma"]
    assert d.network.mtu == 8244
    cidrs = all_cidrs(d) + [ipaddress.ip_network(d.network.private_subnet_cidr), ipaddress.ip_network(d.network.service_cidr)]
    assert len(cidrs) == 8 + 1 + 8 + 2
    for i, a in enumerate(cidrs):
        for b in cidrs[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_fabric_moves_away_from_a_system_range_in_172_16():
    d = design(pools=[pool("a3-ultragpu-8g")], network={"vpc_cidr": "172.16.0.0/20"})
    assert all(c.subnet_of(ipaddress.ip_network("10.128.0.0/9")) for c in all_cidrs(d))
    assert d.network.service_cidr == "10.255.0.0/16"


def test_existing_network_still_gets_gpu_networks():
    d = design(pools=[pool("a3-megagpu-8g")], network={"existing": {"vpc_id": "prod-vpc", "subnet_id": "prod-sub"}})
    assert not d.network.create_vpc and len(d.network.fabric_networks) == 8
    assert d.network.public_subnet_cidr is None


# --- placement ---------------------------------------------------------------------------------


def test_multi_node_pool_gets_compact_placement():
    p = design(pools=[pool("a3-megagpu-8g")]).pools[0]
    assert p.placement.strategy == "compact"


def test_dense_reservation_brings_its_own_placement():
    p = design(pools=[pool("a3-ultragpu-8g", capacity={"type": "reservation", "reservation_id": "a3u-res"})]).pools[0]
    assert p.placement.strategy is None and "a3u-res" in p.placement.reason


def test_single_node_needs_no_placement():
    assert design(pools=[pool("a3-megagpu-8g", max_nodes=1)]).pools[0].placement.strategy is None


# --- images, head, capacity --------------------------------------------------------------------


def test_images_come_from_the_catalog_per_family():
    images = load_catalog().gcp_images
    for itype in ("a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a2-highgpu-8g"):
        assert design(pools=[pool(itype)]).pools[0].image == images["accelerator"].image
    assert design(pools=[pool("a3-highgpu-8g")]).pools[0].image == TCPX_IMAGE
    assert images["head"].image.endswith("ubuntu-2404-lts-amd64")


def test_a3_high_needs_its_own_tcpx_image():
    err = spec_error(pools=[{"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 2}])
    (p,) = err.problems
    assert p.path == "pools[0].image" and "TCPX kernel" in p.allowed


def test_boot_disks_per_family():
    assert design(pools=[pool("a3-ultragpu-8g")]).pools[0].boot_disk_type == "hyperdisk-balanced"
    assert design(pools=[pool("a3-megagpu-8g")]).pools[0].boot_disk_type == "pd-ssd"


def test_head_node_defaults_per_cloud_and_must_be_a_controller_of_the_cloud():
    assert design().slurm.head_instance_type == "n2-standard-8"
    err = spec_error(slurm={"head_node": {"instance_type": "m7i.2xlarge"}})
    assert err.problems[0].path == "slurm.head_node.instance_type" and "n2-standard-8" in err.problems[0].allowed


def test_nic_stack_is_a_slurm_feature():
    assert "tcpxo" in design().slurm.nodesets[0].features
    assert "rdma" in design(pools=[pool("a3-ultragpu-8g")]).slurm.nodesets[0].features


@pytest.mark.parametrize("capacity, problem", [
    ({"type": "flex-start"}, None),
    ({"type": "reservation", "reservation_id": "Bad_Name"}, "a Compute Engine reservation name"),
])
def test_gcp_capacity_kinds(capacity, problem):
    if problem is None:
        assert design(pools=[pool("a3-megagpu-8g", capacity=capacity)]).pools[0].capacity.type == "flex-start"
    else:
        assert problem in spec_error(pools=[pool("a3-megagpu-8g", capacity=capacity)]).problems[0].allowed


def test_flex_start_is_gcp_only():
    aws = {"name": "test", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2, "capacity": "flex-start"}]}
    with pytest.raises(SpecError) as err:
        parse_spec(aws)
    assert "Dynamic Workload Scheduler" in err.value.problems[0].allowed


# --- storage -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tier, minimum", [(125, 72000), (250, 36000), (500, 18000), (1000, 9000)])
def test_undersized_managed_lustre_names_the_tier_minimum(tier, minimum):
    err = spec_error(storage=[{**FSX, "capacity_gib": minimum - 1000, "throughput_mbps_per_tib": tier}])
    (p,) = err.problems
    assert p.path == "storage[0].capacity_gib"
    assert f"at least {minimum} GiB on the {tier} MB/s/TiB tier" in p.allowed
    assert p.suggestion == str(minimum)
    assert f"at least {minimum} GiB" in str(err)


def test_filestore_sizes_per_tier():
    (fs,) = design(storage=[{"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 1280}]).storage
    assert (fs.kind, fs.filestore_tier, fs.throughput_mbps_per_tib) == ("filestore", "ZONAL", 0)
    err = spec_error(storage=[{"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 1300}])
    assert err.problems[0].suggestion == "1280" and "steps of 256" in err.problems[0].allowed
    err = spec_error(storage=[{"name": "home", "type": "filestore", "filestore_tier": "BASIC_SSD", "mount": "/home",
                               "capacity_gib": 2048}])
    assert "2560-65433 GiB" in err.problems[0].allowed


def test_filestore_is_gcp_only_and_takes_no_lustre_settings():
    aws = {"name": "test", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}],
           "storage": [{"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 1024}]}
    with pytest.raises(SpecError) as err:
        parse_spec(aws)
    assert err.value.problems[0].path == "storage[0].type"
    err = spec_error(storage=[{"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 1024,
                               "throughput_mbps_per_tib": 500}])
    assert err.problems[0].path == "storage[0].throughput_mbps_per_tib"


def test_filestore_is_not_counted_as_training_storage():
    from aicluster.design.balance import from_design
    lustre = design(storage=[{**FSX, "capacity_gib": 18000, "throughput_mbps_per_tib": 500}])
    both = design(storage=[{**FSX, "capacity_gib": 18000, "throughput_mbps_per_tib": 500},
                           {"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 10240}])
    assert from_design(both).fs_throughput_gbs == from_design(lustre).fs_throughput_gbs > 0


def test_instance_names_must_fit_gcp():
    long = {**GCP_MIN, "name": "a" * 32}
    err = spec_error(base=long, pools=[pool("a3-megagpu-8g", name="p" * 24, max_nodes=100000)])
    assert err.problems[0].path == "pools[0].name" and "at most 63 characters" in err.problems[0].allowed
    assert design(base=long, pools=[pool("a3-megagpu-8g", name="p" * 24, max_nodes=999)])
