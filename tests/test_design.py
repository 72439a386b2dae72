"""design_cluster: EFA layouts, placement, node names, subnets, storage sizing, images, labels, scale."""
from __future__ import annotations

import copy
import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aicluster.catalog import load_catalog
from aicluster.design.cluster import DEFAULT_VPC_CIDR, design_cluster, efa_interfaces
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import PoolDesign, StorageDesign
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec

CAT = load_catalog()
AWS = CAT.instance_types["aws"]
from tests.support import AWS_MIN, CR, FSX, GCP_MIN  # noqa: E402  shared minimal specs



def design(base=AWS_MIN, pool=None, **top) -> ClusterDesign:
    data = copy.deepcopy(base)
    data.update(copy.deepcopy(top))
    if pool:
        data["pools"][0].update(pool)
    return design_cluster(parse_spec(data))


def pool_design(instance_type="p5.48xlarge", **keys) -> PoolDesign:
    return design(pool={"instance_type": instance_type, **keys}).pools[0]


def storage_error(base=AWS_MIN, **fs) -> SpecError:
    data = copy.deepcopy(base)
    data["storage"] = [{**FSX, **fs}]
    spec = parse_spec(data)
    with pytest.raises(SpecError) as info:
        design_cluster(spec)
    return info.value


# --- EFA layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize("name, efa_devices", [
    ("p4d.24xlarge", 4),
    ("p5.48xlarge", 32),
    ("p5en.48xlarge", 16),
    ("p6-b200.48xlarge", 8),
    ("trn1n.32xlarge", 16),
])
def test_golden_efa_layout(name, efa_devices):
    it = AWS[name]
    nics = efa_interfaces(it)
    efa = [n for n in nics if n.is_efa]
    ena = [n for n in nics if n.interface_type == "interface"]
    assert len(efa) == efa_devices
    assert len(nics) == efa_devices + 1
    # Exactly one ENA interface, the primary at card 0 device 0.
    assert [(n.network_card_index, n.device_index) for n in ena] == [(0, 0)]
    assert nics[0].network_card_index == 0 and nics[0].device_index == 0 and nics[0].interface_type == "interface"
    # Card 0's EFA device at device index 1, efa-only.
    card0_efa = [n for n in efa if n.network_card_index == 0]
    assert [(n.device_index, n.interface_type) for n in card0_efa] == [(1, "efa-only")]
    # Every other EFA card at device index 0.
    assert all(n.device_index == 0 for n in efa if n.network_card_index != 0)
    assert all(n.interface_type == "efa-only" for n in efa)
    # No (card, device) pair twice; no card twice except card 0 (ENA + EFA).
    slots = [(n.network_card_index, n.device_index) for n in nics]
    assert len(set(slots)) == len(slots)
    cards = [n.network_card_index for n in nics]
    assert {c for c in cards if cards.count(c) > 1} == {0}
    assert cards.count(0) == 2
    # Every EFA-capable card carries exactly one EFA device; all card indexes exist on the type.
    efa_cards = sorted(n.network_card_index for n in efa)
    assert efa_cards == sorted(it.efa_cards) == list(range(it.max_efa_interfaces))
    assert max(cards) < it.network_cards


@pytest.mark.parametrize("name", sorted(AWS))
def test_pool_uses_the_layout_by_default(name):
    # A multi-node NVLink domain (p6e-gb200) comes only as one UltraServer on a capacity block.
    unit = AWS[name].nvlink_capacity_unit
    domain = {} if unit == 1 else {"max_nodes": unit, "min_nodes": unit,
                                   "capacity": {"type": "capacity-block", "reservation_id": CR}}
    p = pool_design(name, **domain)
    assert p.efa is True
    assert p.interfaces == efa_interfaces(AWS[name])
    assert p.efa_devices == AWS[name].max_efa_interfaces


def test_efa_true_explicit_same_as_default():
    assert pool_design(efa=True).interfaces == pool_design().interfaces


def test_efa_false_gives_a_single_ena_interface():
    p = pool_design(efa=False)
    assert p.efa is False and p.efa_devices == 0
    assert [(n.network_card_index, n.device_index, n.interface_type) for n in p.interfaces] == [(0, 0, "interface")]


def test_gcp_pools_have_no_efa():
    p = design(GCP_MIN).pools[0]
    assert p.efa is False and p.efa_devices == 0
    assert p.interfaces == ()          # GCP NICs are p.nics (tests/gcp/test_design_gcp.py)


# --- placement ---------------------------------------------------------------------------------


def test_multi_node_pool_gets_cluster_placement():
    p = pool_design(max_nodes=2)
    assert p.placement.strategy == "cluster"
    assert p.placement.reason


def test_single_node_pool_gets_no_placement():
    p = pool_design(max_nodes=1)
    assert p.placement.strategy is None
    assert "single node" in p.placement.reason


def test_spot_multi_node_pool_gets_cluster_placement():
    assert pool_design(max_nodes=8, capacity="spot").placement.strategy == "cluster"


@pytest.mark.parametrize("kind", ["reservation", "capacity-block"])
@pytest.mark.parametrize("max_nodes", [1, 16])
def test_reserved_capacity_gets_no_placement_and_names_the_reservation(kind, max_nodes):
    p = pool_design(max_nodes=max_nodes, capacity={"type": kind, "reservation_id": CR})
    assert p.placement.strategy is None
    assert CR in p.placement.reason
    assert kind in p.placement.reason
    assert p.capacity.reservation_id == CR


# --- node names and hostlists ------------------------------------------------------------------


def test_hostlists_min_2_max_16():
    p = pool_design(min_nodes=2, max_nodes=16)
    assert p.hostlist == "gpu-[1-16]"
    assert p.static_hostlist == "gpu-[1-2]"
    assert p.dynamic_hostlist == "gpu-[3-16]"
    names = p.node_names()
    assert names[0] == "gpu-1" and names[-1] == "gpu-16"
    assert len(names) == 16 == len(set(names))


def test_no_static_nodes():
    p = pool_design(min_nodes=0, max_nodes=4)
    assert p.static_hostlist is None
    assert p.dynamic_hostlist == "gpu-[1-4]"


def test_single_node():
    p = pool_design(max_nodes=1)
    assert p.hostlist == "gpu-1"
    assert p.dynamic_hostlist == "gpu-1"
    assert p.node_names() == ["gpu-1"]


def test_single_static_node():
    p = pool_design(min_nodes=1, max_nodes=1)
    assert p.static_hostlist == "gpu-1"
    assert p.dynamic_hostlist is None


def test_all_static():
    p = pool_design(min_nodes=8, max_nodes=8)
    assert p.static_hostlist == "gpu-[1-8]"
    assert p.dynamic_hostlist is None


def test_one_static_rest_dynamic():
    p = pool_design(min_nodes=1, max_nodes=2)
    assert p.static_hostlist == "gpu-1"
    assert p.dynamic_hostlist == "gpu-2"


@pytest.mark.parametrize("min_nodes, max_nodes", [(0, 1), (0, 7), (3, 3), (5, 100)])
def test_node_names_match_max_nodes(min_nodes, max_nodes):
    p = pool_design(min_nodes=min_nodes, max_nodes=max_nodes, name="train")
    names = p.node_names()
    assert len(names) == max_nodes
    assert names == [f"train-{i}" for i in range(1, max_nodes + 1)]
    assert p.accelerators == max_nodes * p.instance.accelerator_count


# --- network -----------------------------------------------------------------------------------


def test_default_network():
    net = design().network
    assert DEFAULT_VPC_CIDR == "10.0.0.0/16"
    assert net.create_vpc is True
    assert net.vpc_cidr == "10.0.0.0/16"
    assert net.private_subnet_cidr == "10.0.0.0/17"
    assert net.public_subnet_cidr == "10.0.128.0/18"
    assert net.existing_vpc_id is None and net.existing_subnet_id is None
    assert net.ssh_ingress_cidrs == ()


def _check_subnets(net):
    vpc = ipaddress.ip_network(net.vpc_cidr)
    private = ipaddress.ip_network(net.private_subnet_cidr)
    public = ipaddress.ip_network(net.public_subnet_cidr)
    assert private.subnet_of(vpc) and public.subnet_of(vpc)
    assert not private.overlaps(public)
    assert private.prefixlen == vpc.prefixlen + 1
    assert public.prefixlen == vpc.prefixlen + 2


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "10.1.0.0/20", "172.16.0.0/22", "192.168.10.0/24",
                                  "172.31.255.0/24"])
def test_subnets_inside_vpc(cidr):
    net = design(network={"vpc_cidr": cidr}).network
    assert net.vpc_cidr == cidr
    _check_subnets(net)


_PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


@st.composite
def private_vpcs(draw):
    base = draw(st.sampled_from(_PRIVATE))
    prefix = draw(st.integers(min_value=max(16, base.prefixlen), max_value=24))
    offset = draw(st.integers(min_value=0, max_value=base.num_addresses - 1))
    return ipaddress.ip_network((int(base.network_address) + offset, prefix), strict=False)


@given(private_vpcs())
@settings(max_examples=100, deadline=None)
def test_subnets_inside_vpc_property(vpc):
    net = design(network={"vpc_cidr": str(vpc)}).network
    assert net.vpc_cidr == str(vpc)
    _check_subnets(net)


def test_existing_network_passes_ids_through():
    vpc, subnet = "vpc-0123456789abcdef0", "subnet-0fedcba9876543210"
    net = design(network={"existing": {"vpc_id": vpc, "subnet_id": subnet},
                          "ssh_ingress_cidrs": ["203.0.113.0/24"]}).network
    assert net.create_vpc is False
    assert (net.existing_vpc_id, net.existing_subnet_id) == (vpc, subnet)
    assert net.vpc_cidr is None and net.private_subnet_cidr is None and net.public_subnet_cidr is None
    assert net.ssh_ingress_cidrs == ("203.0.113.0/24",)


def test_ssh_cidrs_pass_through():
    net = design(network={"ssh_ingress_cidrs": ["203.0.113.0/24", "198.51.100.0/25"]}).network
    assert net.ssh_ingress_cidrs == ("203.0.113.0/24", "198.51.100.0/25")


@pytest.mark.parametrize("given_cidr, canonical", [
    ("203.0.113.5", "203.0.113.5/32"),
    ("198.51.100.0/255.255.255.0", "198.51.100.0/24"),
    ("198.51.100.0/024", "198.51.100.0/24"),
])
def test_ssh_cidrs_are_canonical(given_cidr, canonical):
    assert design(network={"ssh_ingress_cidrs": [given_cidr]}).network.ssh_ingress_cidrs == (canonical,)


# --- storage -----------------------------------------------------------------------------------


def test_persistent_2_capacity_3000_refused():
    err = storage_error(capacity_gib=3000)
    (p,) = err.problems
    assert p.path == "storage[0].capacity_gib"
    assert p.value == 3000
    assert "1200, 2400, then multiples of 2400" in p.allowed
    assert "2400" in p.suggestion and "4800" in p.suggestion
    assert "storage[0].capacity_gib" in str(err)


def test_throughput_300_refused_suggests_250():
    err = storage_error(capacity_gib=2400, throughput_mbps_per_tib=300)
    (p,) = err.problems
    assert p.path == "storage[0].throughput_mbps_per_tib"
    assert p.value == 300
    assert "125, 250, 500, 1000" in p.allowed
    assert p.suggestion == "250"


def test_capacity_and_throughput_both_reported():
    err = storage_error(capacity_gib=3000, throughput_mbps_per_tib=300)
    assert {p.path for p in err.problems} == {"storage[0].capacity_gib", "storage[0].throughput_mbps_per_tib"}


def test_default_throughput_is_250():
    (fs,) = design(storage=[FSX]).storage
    assert isinstance(fs, StorageDesign)
    assert fs.kind == "fsx-lustre"
    assert fs.deployment_type == "PERSISTENT_2"
    assert fs.throughput_mbps_per_tib == 250
    assert fs.protect is True


def test_persistent_1_default_throughput():
    (fs,) = design(storage=[{**FSX, "deployment_type": "PERSISTENT_1"}]).storage
    assert fs.throughput_mbps_per_tib == 200


def test_scratch_2_with_throughput_refused():
    err = storage_error(deployment_type="SCRATCH_2", throughput_mbps_per_tib=200)
    (p,) = err.problems
    assert p.path == "storage[0].throughput_mbps_per_tib"
    assert "leave it out for SCRATCH_2" in p.allowed


def test_scratch_2_uses_baseline():
    (fs,) = design(storage=[{**FSX, "deployment_type": "SCRATCH_2", "capacity_gib": 2400}]).storage
    assert fs.throughput_mbps_per_tib == 200


def test_scratch_1_capacity_steps():
    (fs,) = design(storage=[{**FSX, "deployment_type": "SCRATCH_1", "capacity_gib": 3600}]).storage
    assert fs.capacity_gib == 3600
    err = storage_error(deployment_type="SCRATCH_1", capacity_gib=4800)
    assert err.problems[0].path == "storage[0].capacity_gib"
    assert "multiples of 3600" in err.problems[0].allowed


@pytest.mark.parametrize("capacity, tier, expected", [
    (24000, 500, 11718.75),
    (1200, 125, 146.484375),
    (4800, 250, 1171.875),
    (2400, 1000, 2343.75),
])
def test_aggregate_throughput(capacity, tier, expected):
    (fs,) = design(storage=[{**FSX, "capacity_gib": capacity, "throughput_mbps_per_tib": tier}]).storage
    assert fs.throughput_mbps == pytest.approx(expected)
    assert fs.throughput_mbps == pytest.approx(capacity / 1024 * tier)


def test_storage_fields_pass_through():
    (fs,) = design(storage=[{**FSX, "name": "data", "mount": "/data", "capacity_gib": 4800,
                             "import_path": "s3://my-bucket/prefix", "protect": False}]).storage
    assert (fs.name, fs.mount, fs.capacity_gib, fs.import_path, fs.protect) == (
        "data", "/data", 4800, "s3://my-bucket/prefix", False)


def test_gcp_managed_lustre_default():
    (fs,) = design(GCP_MIN, storage=[{**FSX, "capacity_gib": 18000}]).storage
    assert fs.kind == "managed-lustre"
    assert fs.deployment_type is None
    assert fs.throughput_mbps_per_tib == 500


@pytest.mark.parametrize("tier, minimum", [(125, 72000), (250, 36000), (500, 18000), (1000, 9000)])
def test_gcp_managed_lustre_below_minimum_refused(tier, minimum):
    err = storage_error(GCP_MIN, capacity_gib=minimum - 1, throughput_mbps_per_tib=tier)
    (p,) = err.problems
    assert p.path == "storage[0].capacity_gib"
    assert str(minimum) in p.allowed
    assert p.suggestion == str(minimum)
    (fs,) = design(GCP_MIN, storage=[{**FSX, "capacity_gib": minimum, "throughput_mbps_per_tib": tier}]).storage
    assert fs.capacity_gib == minimum


def test_gcp_managed_lustre_unknown_tier_refused():
    err = storage_error(GCP_MIN, capacity_gib=18000, throughput_mbps_per_tib=300)
    (p,) = err.problems
    assert p.path == "storage[0].throughput_mbps_per_tib"
    assert "125, 250, 500, 1000" in p.allowed


def test_gcp_deployment_type_refused():
    err = storage_error(GCP_MIN, capacity_gib=18000, deployment_type="PERSISTENT_2")
    (p,) = err.problems
    assert p.path == "storage[0].deployment_type"
    assert "gcp" in p.allowed


def test_problems_in_several_filesystems_are_all_reported():
    data = copy.deepcopy(AWS_MIN)
    data["storage"] = [{**FSX, "capacity_gib": 3000},
                       {**FSX, "name": "scratch", "mount": "/scratch", "throughput_mbps_per_tib": 300}]
    with pytest.raises(SpecError) as info:
        design_cluster(parse_spec(data))
    assert {p.path for p in info.value.problems} == {"storage[0].capacity_gib",
                                                      "storage[1].throughput_mbps_per_tib"}


# --- images ------------------------------------------------------------------------------------

GPU_SSM = CAT.images["gpu"]["ssm_parameter"]
NEURON_SSM = CAT.images["trainium"]["ssm_parameter"]


@pytest.mark.parametrize("name", ["p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                                  "g5.48xlarge", "g6e.48xlarge"])
def test_gpu_pools_use_the_dlami_parameter(name):
    p = pool_design(name)
    assert p.image == f"resolve:ssm:{GPU_SSM}"
    assert "deeplearning" in p.image
    assert p.root_device == CAT.images["gpu"]["root_device"]


@pytest.mark.parametrize("name", ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trainium"])
def test_trainium_pools_use_the_neuron_parameter(name):
    p = pool_design(name)
    assert p.image == f"resolve:ssm:{NEURON_SSM}"
    assert "neuron" in p.image


def test_ami_override_passes_through():
    assert pool_design(image="ami-0123456789abcdef0").image == "ami-0123456789abcdef0"


def test_ssm_path_override_becomes_resolve_ssm():
    assert pool_design(image="/my/team/ami").image == "resolve:ssm:/my/team/ami"


def test_resolve_ssm_override_is_not_doubled():
    assert pool_design(image="resolve:ssm:/my/team/ami").image == "resolve:ssm:/my/team/ami"


def test_root_volume_passes_through():
    assert pool_design(root_volume_gib=500).root_volume_gib == 500
    assert pool_design().root_volume_gib == 200


# --- labels ------------------------------------------------------------------------------------


def test_labels():
    d = design(tags={"team": "ml", "cost-center": "42"})
    labels = d.labels("compute", "gpu")
    assert labels == {"team": "ml", "cost-center": "42", "aicluster-cluster": "test",
                      "aicluster-role": "compute", "aicluster-pool": "gpu"}
    head = d.labels("head")
    assert "aicluster-pool" not in head
    assert head["aicluster-role"] == "head" and head["aicluster-cluster"] == "test"
    assert d.tags == {"team": "ml", "cost-center": "42"}


def test_pool_lookup():
    d = design(pools=[{"name": "gpu", "instance_type": "h100", "max_nodes": 2},
                      {"name": "trn", "instance_type": "trainium", "max_nodes": 2}])
    assert d.pool("trn").instance.name == "trn1n.32xlarge"
    with pytest.raises(KeyError, match="gpu, trn"):
        d.pool("cpu")


def test_design_carries_spec_basics():
    d = design(scheduler="kubernetes", workload={"model_params_b": 70}, kubernetes={"api_access": "vpc"})
    assert (d.name, d.cloud, d.region, d.zone, d.scheduler) == ("test", "aws", "us-east-1", "us-east-1a",
                                                                 "kubernetes")
    assert d.workload.model_params_b == 70


# --- scale -------------------------------------------------------------------------------------


def test_large_pool_designs_like_a_small_one():
    big = pool_design(max_nodes=8192, min_nodes=0)
    small = pool_design(max_nodes=8)
    assert big.interfaces == small.interfaces
    assert len(big.interfaces) == len(small.interfaces) == 33
    assert big.hostlist == "gpu-[1-8192]"
    assert len(big.node_names()) == 8192
    assert big.accelerators == 8192 * 8
    assert big.placement.strategy == "cluster"
