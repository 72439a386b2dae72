"""The catalog: every fact sourced, the issue's types all present, AWS facts cross-checked against
moto's independent copy of EC2 DescribeInstanceTypes, FSx capacity rules."""
from __future__ import annotations

import shutil

import pytest
import yaml

import aicluster.catalog as catalog_module
from aicluster.catalog import CatalogError, load_catalog
from tests.support.catalog import NOT_IN_MOTO

CAT = load_catalog()
AWS = CAT.instance_types["aws"]
GCP = CAT.instance_types["gcp"]

ISSUE_AWS = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
             "p6-b200.48xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "g6e.48xlarge",
             "g5.48xlarge", "p6e-gb200.36xlarge"]
ISSUE_GCP = ["a2-highgpu-8g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g",
             "a4-highgpu-8g", "a4x-highgpu-4g"]


# --- every fact has a source --------------------------------------------------------------------


def _sourced(obj) -> bool:
    return isinstance(obj.source, str) and obj.source.strip() != ""


@pytest.mark.parametrize("name", sorted(AWS) + sorted(GCP))
def test_instance_type_has_source(name):
    assert _sourced(CAT.find(name))


@pytest.mark.parametrize("model", sorted(CAT.accelerators))
def test_accelerator_has_source(model):
    assert _sourced(CAT.accelerators[model])


@pytest.mark.parametrize("gen", sorted(CAT.tpus))
def test_tpu_has_source(gen):
    assert _sourced(CAT.tpus[gen])


@pytest.mark.parametrize("name", sorted(CAT.fsx))
def test_fsx_type_has_source(name):
    assert _sourced(CAT.fsx[name])


@pytest.mark.parametrize("role", sorted(CAT.images))
def test_image_has_source(role):
    source = CAT.images[role].get("source")
    assert isinstance(source, str) and source.strip()
    assert CAT.images[role]["ssm_parameter"].startswith("/aws/service/")


def test_managed_lustre_tiers_have_source():
    assert CAT.managed_lustre
    assert all(_sourced(t) for t in CAT.managed_lustre.values())


@pytest.fixture
def catalog_copy(tmp_path, monkeypatch):
    """A writable copy of the catalog YAML that load_catalog reads instead of the real one."""
    shutil.copytree(catalog_module._HERE, tmp_path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setattr(catalog_module, "_HERE", tmp_path)
    load_catalog.cache_clear()
    yield tmp_path
    # Runs before monkeypatch restores _HERE; the next load_catalog() call reads the real files.
    load_catalog.cache_clear()


def _edit(folder, filename, path, value=...):
    """Delete (value=...) or set the key at `path` in `folder/filename`."""
    file = folder / filename
    doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    file.write_text(yaml.safe_dump(doc), encoding="utf-8")


def test_untouched_copy_loads(catalog_copy):
    copy = load_catalog()
    assert copy is not CAT
    assert sorted(copy.instance_types["aws"]) == sorted(AWS)


UNSOURCED = [
    ("aws.yaml", ("instance_types", "p5.48xlarge", "source")),
    ("gcp.yaml", ("instance_types", "a3-megagpu-8g", "source")),
    ("aws.yaml", ("images", "gpu", "source")),
    ("accelerators.yaml", ("accelerators", "H100", "source")),
    ("tpu.yaml", ("tpus", "v5p", "source")),
    ("storage.yaml", ("fsx_lustre", "PERSISTENT_2", "source")),
    ("storage.yaml", ("managed_lustre", "source")),
]


@pytest.mark.parametrize("filename, path", UNSOURCED, ids=[f"{f}:{'.'.join(p[:-1])}" for f, p in UNSOURCED])
@pytest.mark.parametrize("how", ["missing", "empty", "blank", "not-a-string"])
def test_loader_refuses_entry_without_source(catalog_copy, filename, path, how):
    value = {"missing": ..., "empty": "", "blank": "   ", "not-a-string": 42}[how]
    _edit(catalog_copy, filename, path, value)
    with pytest.raises(CatalogError, match="source"):
        load_catalog()


def test_loader_refuses_an_aws_type_naming_an_unknown_image_role(catalog_copy):
    _edit(catalog_copy, "aws.yaml", ("instance_types", "p6e-gb200.36xlarge", "image"), "gpu-arm")
    with pytest.raises(CatalogError, match="unknown image role 'gpu-arm'"):
        load_catalog()


def test_real_catalog_is_back_after_patching():
    assert load_catalog().instance_types["aws"]["p5.48xlarge"].source


# --- the issue's list is present ---------------------------------------------------------------


@pytest.mark.parametrize("name", ISSUE_AWS)
def test_issue_aws_types_present(name):
    it = AWS[name]
    assert it.cloud == "aws" and it.name == name
    assert it.accelerator_count > 0 and it.efa_capable


@pytest.mark.parametrize("name", ISSUE_GCP)
def test_issue_gcp_types_present(name):
    it = GCP[name]
    # A4X is the 4-GPU tray of an NVL72 rack; the HGX types carry 8.
    assert it.cloud == "gcp" and it.accelerator_count == (4 if it.nvlink_domain else 8)


@pytest.mark.parametrize("name, accelerator, count", [
    ("p4d.24xlarge", "A100-40GB", 8), ("p4de.24xlarge", "A100-80GB", 8), ("p5.48xlarge", "H100", 8),
    ("p5e.48xlarge", "H200", 8), ("p5en.48xlarge", "H200", 8), ("p6-b200.48xlarge", "B200", 8),
    ("trn1.32xlarge", "Trainium", 16), ("trn1n.32xlarge", "Trainium", 16), ("trn2.48xlarge", "Trainium2", 16),
    ("g6e.48xlarge", "L40S", 8), ("g5.48xlarge", "A10G", 8), ("p6e-gb200.36xlarge", "GB200", 4),
    ("a2-highgpu-8g", "A100-40GB", 8), ("a2-ultragpu-8g", "A100-80GB", 8), ("a3-highgpu-8g", "H100", 8),
    ("a3-megagpu-8g", "H100", 8), ("a3-ultragpu-8g", "H200", 8), ("a4-highgpu-8g", "B200", 8),
    ("a4x-highgpu-4g", "GB200", 4),
])
def test_accelerators_per_type(name, accelerator, count):
    it = CAT.find(name)
    assert it.accelerator.model == accelerator and it.accelerator_count == count


def test_a4x_is_an_nvl72_vm_with_one_rdma_nic_a_gpu():
    """Issue 28: A4X is 4 GB200 GPUs a VM, 18 VMs (one reservation sub-block) a 72-GPU domain; its
    4 ConnectX-7 NICs are one a GPU (1600 of its 2000 Gbps); arm64, so no default image."""
    it = GCP["a4x-highgpu-4g"]
    assert (it.accelerator.model, it.accelerator_count, it.nvlink_domain_gpus, it.nvlink_capacity_unit) \
        == ("GB200", 4, 72, 18)
    assert (it.gpu_nics, it.gpu_network_gbps, it.host_nics, it.network_gbps) == (4, 1600, 2, 2000)
    assert (it.vcpu, it.memory_gib, it.nic_mtu, it.boot_disk_type, it.image) == (140, 884, 8896, "hyperdisk-balanced", None)
    assert CAT.resolve("gcp", "gb200") is it and CAT.resolve("aws", "gb200") is AWS["p6e-gb200.36xlarge"]


def test_p6e_gb200_is_an_nvl72_node_whose_efa_devices_are_not_one_per_gpu():
    """Issue 28: 4 GPUs a node, 72 a domain (18 nodes), sold as 9- or 18-node UltraServers; 17
    network cards, card 0 ENA only, one EFA device on each of cards 1-16 (100 Gbps each)."""
    it = AWS["p6e-gb200.36xlarge"]
    assert (it.accelerator_count, it.nvlink_domain_gpus, it.nodes_per_nvlink_domain, it.nvlink_capacity_unit) \
        == (4, 72, 18, 9)
    assert (it.network_cards, it.max_efa_interfaces, it.efa_cards) == (17, 16, tuple(range(1, 17)))
    assert it.max_efa_interfaces != it.accelerator_count and it.card_gbps == 100
    assert (it.vcpu, it.cores, it.threads_per_core, it.memory_gib) == (144, 144, 1, 960)
    # Capacity Blocks only: no on-demand rate; its reference price is the block rate (prices.yaml)
    from aicluster.catalog.pricing import instance_price, reference_price
    assert instance_price("aws", it.name, "us-east-1") is None
    assert reference_price("aws", it.name).capacity == "capacity-block"
    assert it.nvlink_domain_source


@pytest.mark.parametrize("model, bf16, fp8, gres", [("GB200", 2500, 5000, "gb200"), ("GB300", 2500, 5000, "gb300")])
def test_grace_blackwell_accelerators_are_dense_figures(model, bf16, fp8, gres):
    """Dense (no sparsity): the superchip GPUs run faster than their HGX siblings (B200 2250/4500)."""
    acc = CAT.accelerators[model]
    assert (acc.bf16_tflops, acc.fp8_tflops, acc.gres_type, acc.kind) == (bf16, fp8, gres, "gpu")
    assert acc.hbm_bandwidth_gbs == 8000 and acc.scale_up_gbs == 900 and acc.scale_up_source
    assert acc.bf16_tflops > CAT.accelerators["B200"].bf16_tflops


@pytest.mark.parametrize("name, gpu_nics, stack, host_nics", [
    ("a2-highgpu-8g", 0, "none", 1),
    ("a2-ultragpu-8g", 0, "none", 1),
    ("a3-highgpu-8g", 4, "tcpx", 1),
    ("a3-megagpu-8g", 8, "tcpxo", 1),
    ("a3-ultragpu-8g", 8, "rdma", 2),
    ("a4-highgpu-8g", 8, "rdma", 2),
    ("a4x-highgpu-4g", 4, "rdma", 2),
])
def test_gcp_gpu_nics(name, gpu_nics, stack, host_nics):
    it = GCP[name]
    assert (it.gpu_nics, it.gpu_nic_stack, it.host_nics) == (gpu_nics, stack, host_nics)
    assert it.efa_capable is False
    assert (it.gpu_network_gbps > 0) == (gpu_nics > 0)
    assert it.gpu_network_gbps <= it.network_gbps


@pytest.mark.parametrize("cloud, table", [("aws", AWS), ("gcp", GCP)])
def test_aliases_point_at_catalog_types(cloud, table):
    assert CAT.aliases[cloud]
    for alias, target in CAT.aliases[cloud].items():
        assert alias == alias.lower()
        assert target in table
        assert CAT.resolve(cloud, alias) is table[target]


TPU_FACTS = {
    "v4": ("tpu-v4-podslice", {4: "ct4p-hightpu-4t"}, 3, ["2x2x1", "2x2x2", "4x4x4", "8x16x16"]),
    "v5e": ("tpu-v5-lite-podslice", {1: "ct5lp-hightpu-1t", 4: "ct5lp-hightpu-4t", 8: "ct5lp-hightpu-8t"}, 2,
            ["1x1", "2x2", "2x4", "4x4", "16x16"]),
    "v5p": ("tpu-v5p-slice", {4: "ct5p-hightpu-4t"}, 3, ["2x2x1", "2x4x4", "4x4x4", "16x16x24"]),
    "v6e": ("tpu-v6e-slice", {1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"}, 2,
            ["1x1", "2x2", "2x4", "8x16", "16x16"]),
    "tpu7x": ("tpu7x", {4: "tpu7x-standard-4t"}, 3, ["2x2x1", "2x2x2", "4x4x4", "8x16x16"]),
}


def test_tpu7x_ironwood_per_chip_and_gke_needs():
    """Issue 28: TPU7x chips carry 192 GiB HBM, 2,307 dense BF16 and 4,614 FP8 TFLOPS, 1.2 TB/s ICI;
    GKE places its slices by a workload policy and runs it from 1.34.3-gke.1318000, which the
    pinned GKE version satisfies."""
    from aicluster.catalog.kubernetes import versions

    g = CAT.tpus["tpu7x"]
    assert (g.hbm_gib_per_chip, g.bf16_tflops, g.fp8_tflops, g.ici_gbs_bidirectional) == (192, 2307, 4614, 1200)
    assert g.workload_policy and g.boot_disk_type == "hyperdisk-balanced" and g.max_chips == 9216
    need = tuple(int(p) for p in g.min_gke_version.split("-")[0].split("."))
    pinned = tuple(int(p) for p in versions().gke.version.split("."))
    assert pinned[:2] > need[:2] or (pinned[:2] == need[:2] and len(pinned) > 2 and pinned >= need), (pinned, need)
    assert not any(CAT.tpus[o].workload_policy for o in ("v4", "v5e", "v5p", "v6e"))


@pytest.mark.parametrize("gen", sorted(TPU_FACTS))
def test_tpu_generation(gen):
    accel, machines, dims, some_topologies = TPU_FACTS[gen]
    tpu = CAT.tpus[gen]
    assert tpu.gke_accelerator == accel
    assert dict(tpu.machine_types) == machines
    assert tpu.ici_dims == dims
    assert set(some_topologies) <= set(tpu.topologies)
    assert len(set(tpu.topologies)) == len(tpu.topologies)
    for topology in tpu.topologies:
        sizes = [int(n) for n in topology.split("x")]
        assert len(sizes) == dims, topology
        chips = 1
        for n in sizes:
            chips *= n
        assert chips <= tpu.max_chips, topology
    for topology, chips in tpu.single_host_topologies.items():
        assert topology in tpu.topologies
        product = 1
        for n in topology.split("x"):
            product *= int(n)
        assert product == chips
        assert chips in tpu.machine_types  # a machine type with exactly that many chips


def test_fsx_persistent_2_throughput_tiers():
    p2 = CAT.fsx["PERSISTENT_2"]
    assert p2.throughput_mbps_per_tib == (125, 250, 500, 1000)
    assert p2.storage_type == "SSD"
    assert dict(p2.efa_capacity_step_gib) == {125: 38400, 250: 19200, 500: 9600, 1000: 4800}


def test_scratch_types_have_a_fixed_baseline():
    for name in ("SCRATCH_1", "SCRATCH_2"):
        assert CAT.fsx[name].throughput_mbps_per_tib == ()
        assert CAT.fsx[name].baseline_mbps_per_tib == 200


def test_managed_lustre_tiers():
    assert {t: m.min_capacity_gib for t, m in CAT.managed_lustre.items()} == {
        125: 72000, 250: 36000, 500: 18000, 1000: 9000}


# --- moto cross-check --------------------------------------------------------------------------

# Disagreements between the catalog and moto's copy of DescribeInstanceTypes that were checked
# against a primary source. The test fails when one disappears, so each is removed once moto is fixed.
KNOWN_MOTO_DISAGREEMENTS = {
    ("trn2.48xlarge", "accelerator_memory_mib"):
        "moto reports 524288 MiB per Neuron device; the AWS Neuron docs (Trainium2 architecture) give "
        "96 GiB HBM per Trainium2 chip = 98304 MiB, which the catalog holds",
}


@pytest.fixture
def moto_instance_types(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_SECURITY_TOKEN": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    import boto3  # required test dependencies: a missing one fails, never skips
    import moto
    with moto.mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        found = ec2.describe_instance_types(InstanceTypes=sorted(set(AWS) - set(NOT_IN_MOTO)))["InstanceTypes"]
    return {t["InstanceType"]: t for t in found}


def _compare(it, moto_type) -> dict[tuple[str, str], tuple]:
    """(type, field) -> (catalog, moto) for every field that disagrees."""
    out = {}

    def check(field, ours, theirs):
        if ours != theirs:
            out[(it.name, field)] = (ours, theirs)

    if it.accelerator.kind == "gpu":
        devices = moto_type.get("GpuInfo", {}).get("Gpus", [{}])
    else:
        devices = moto_type.get("NeuronInfo", {}).get("NeuronDevices", [{}])
    device = devices[0] if devices else {}
    check("accelerator_count", it.accelerator_count, device.get("Count"))
    check("accelerator_memory_mib", it.accelerator.memory_mib, device.get("MemoryInfo", {}).get("SizeInMiB"))
    check("vcpu", it.vcpu, moto_type.get("VCpuInfo", {}).get("DefaultVCpus"))
    check("cores", it.cores, moto_type.get("VCpuInfo", {}).get("DefaultCores"))
    check("threads_per_core", it.threads_per_core, moto_type.get("VCpuInfo", {}).get("DefaultThreadsPerCore"))
    check("memory_mib", None if it.memory_gib is None else it.memory_gib * 1024,
          moto_type.get("MemoryInfo", {}).get("SizeInMiB"))
    network = moto_type.get("NetworkInfo", {})
    check("network_cards", it.network_cards, network.get("MaximumNetworkCards"))
    check("max_efa_interfaces", it.max_efa_interfaces, network.get("EfaInfo", {}).get("MaximumEfaInterfaces"))
    cards = {c.get("NetworkCardIndex"): c for c in network.get("NetworkCards", [])}
    for index in it.efa_cards:
        types = cards.get(index, {}).get("InterfaceTypes", [])
        check(f"efa_cards[{index}]", True, "efa-only" in types or "efa" in types)
    return out


def test_moto_knows_every_aws_type(moto_instance_types):
    assert sorted(moto_instance_types) == sorted(set(AWS) - set(NOT_IN_MOTO))


def test_types_moto_lacks_are_still_missing_from_moto():
    """A NOT_IN_MOTO entry is removed once moto has the type, so the cross-check covers it."""
    import gzip
    import json
    from pathlib import Path

    import moto

    types = json.loads(gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read())
    assert set(NOT_IN_MOTO) <= set(AWS)
    assert not [name for name in NOT_IN_MOTO if name in types]


def test_catalog_matches_moto_describe_instance_types(moto_instance_types):
    mismatches = {}
    for name, it in AWS.items():
        if name not in NOT_IN_MOTO:
            mismatches.update(_compare(it, moto_instance_types[name]))
    unexplained = {k: v for k, v in mismatches.items() if k not in KNOWN_MOTO_DISAGREEMENTS}
    assert unexplained == {}, f"catalog vs moto (catalog, moto): {unexplained}"
    stale = sorted(set(KNOWN_MOTO_DISAGREEMENTS) - set(mismatches))
    assert stale == [], f"moto now agrees on {stale}: remove them from KNOWN_MOTO_DISAGREEMENTS"


def test_known_trn2_disagreement_is_as_documented(moto_instance_types):
    neuron = moto_instance_types["trn2.48xlarge"]["NeuronInfo"]["NeuronDevices"][0]
    assert neuron["MemoryInfo"]["SizeInMiB"] == 524288
    assert AWS["trn2.48xlarge"].accelerator.memory_mib == 96 * 1024


def test_efa_cards_cover_every_card():
    # moto lists every card of these types with efa-only; the layout relies on one EFA device per card.
    # p6-b300 and p6e-gb200 are the exceptions: their card 0 is ENA only (moto: InterfaceTypes
    # ["interface"] on p6-b300; the EKS user guide: p6e-gb200's primary card 0 is of type interface).
    for it in AWS.values():
        if it.name in ("p6-b300.48xlarge", "p6e-gb200.36xlarge"):
            assert it.efa_cards == tuple(range(1, 17)) and it.network_cards == 17
            continue
        assert it.efa_cards == tuple(range(it.max_efa_interfaces))
        assert it.max_efa_interfaces == it.network_cards


# --- FSx capacity rules ------------------------------------------------------------------------

P2 = CAT.fsx["PERSISTENT_2"]
S1 = CAT.fsx["SCRATCH_1"]


@pytest.mark.parametrize("gib", [1200, 2400, 4800, 7200, 24000, 2400 * 100])
def test_persistent_2_allowed(gib):
    assert P2.capacity_allowed(gib)


@pytest.mark.parametrize("gib", [0, -2400, 1000, 1199, 1201, 3000, 3600, 6000, 24001])
def test_persistent_2_refused(gib):
    assert not P2.capacity_allowed(gib)


# FSx API reference (CreateFileSystem StorageCapacity): "For SCRATCH_1 deployment type, valid values
# are 1200 GiB, 2400 GiB, and increments of 3600 GiB" - i.e. 1200, 2400, 3600, 7200, 10800, ...
@pytest.mark.parametrize("gib", [1200, 2400, 3600, 7200, 10800])
def test_scratch_1_allowed(gib):
    assert S1.capacity_allowed(gib)


@pytest.mark.parametrize("gib", [1000, 3000, 4800, 6000, 9600])
def test_scratch_1_refused(gib):
    assert not S1.capacity_allowed(gib)


@pytest.mark.parametrize("name", ["PERSISTENT_1", "SCRATCH_2"])
def test_other_ssd_types_follow_2400_steps(name):
    fsx = CAT.fsx[name]
    assert all(fsx.capacity_allowed(g) for g in (1200, 2400, 4800, 9600))
    assert not any(fsx.capacity_allowed(g) for g in (1000, 3000, 3600, 6000))


def test_capacity_rule_text():
    assert P2.capacity_rule() == "1200, 2400, then multiples of 2400 GiB"
    assert S1.capacity_rule() == "1200, 2400, then multiples of 3600 GiB"


@pytest.mark.parametrize("gib, expected", [
    (1, 1200), (1000, 1200), (1200, 1200), (1201, 2400), (2400, 2400), (2401, 4800), (3000, 4800),
    (4800, 4800), (23000, 24000), (24000, 24000), (1000.5, 1200),
])
def test_capacity_at_least(gib, expected):
    assert P2.capacity_at_least(gib) == expected
    assert P2.capacity_allowed(expected)


@pytest.mark.parametrize("gib, expected", [
    (3000, [2400, 4800]), (1000, [1200]), (1800, [1200, 2400]), (5000, [4800, 7200]), (23000, [21600, 24000]),
])
def test_neighbours(gib, expected):
    got = P2.neighbours(gib)
    assert got == expected
    assert all(P2.capacity_allowed(g) for g in got)


def test_scratch_1_neighbours():
    assert S1.neighbours(3000) == [2400, 3600]
    assert S1.neighbours(5000) == [3600, 7200]
    assert S1.capacity_at_least(4800) == 7200


# --- the trusted loader: libyaml reads the catalog exactly as pure-Python PyYAML does ----------


CATALOG_YAML = sorted(p.name for p in catalog_module._HERE.glob("*.yaml"))


def test_every_catalog_file_is_compared():
    assert len(CATALOG_YAML) >= 13


@pytest.mark.parametrize("name", CATALOG_YAML)
def test_catalog_yaml_loads_the_same_with_libyaml(name):
    """load_yaml takes libyaml's parser where PyYAML has it (~10x faster): the documents must be
    the same as SafeLoader's, value for value and type for type (a date stays a date, 1.0 a float)."""
    text = (catalog_module._HERE / name).read_text(encoding="utf-8")
    pure = yaml.load(text, Loader=yaml.SafeLoader)
    fast = catalog_module.load_yaml(text)
    assert fast == pure and pure == fast
    assert repr(fast) == repr(pure)      # equal and of the same types (1 == 1.0 == True would pass ==)
    if yaml.__with_libyaml__:
        assert catalog_module._TRUSTED_LOADER is yaml.CSafeLoader
        with open(catalog_module._HERE / name, encoding="utf-8") as fh:
            assert repr(catalog_module.load_yaml(fh)) == repr(pure)
