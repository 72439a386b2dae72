"""Hand-written bad specs through the whole `aicluster plan FILE` path: exit 2, every problem
named by its YAML path with the value and what is allowed, no traceback.

Two tables. tests/support/bad_specs.py's BAD table (shape and meaning, checked there against
parse_spec) is replayed here through the CLI. STAGES adds the cases only the later stages catch
(sizing in design, the stack file, the provider's region) and the issue's list that BAD lacked:
a TPU on AWS, EFA on a type without it, Lustre below the minimum.

On a TPU on AWS: the spec has no TPU field (TPU pools are GCP's to design), so a TPU written where
an AWS type goes - `instance_type: v5p`, `tpu-v5p-slice`, `ct5p-hightpu-4t` - is refused at
pools[N].instance_type with "TPUs are GCP-only". Whatever field GCP TPU pools get later, that is
where an AWS user writes one by mistake.
"""
from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support import AWS_MIN, CR, FSX, GCP_MIN
from tests.support.bad_specs import BAD, SUBNET, VPC, pool, spec


def cli(*args) -> tuple[int, str, str]:
    from aicluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def plan_file(tmp_path: Path, data, stack_config: dict | None = None) -> str:
    """A bare spec file, or a stack file when `stack_config` gives the rest of its config."""
    if stack_config is None:
        path, doc = tmp_path / "cluster.yaml", data
    else:
        path, doc = tmp_path / "Pulumi.bad.yaml", {"config": {**stack_config, "aicluster:cluster": data}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return str(path)


def assert_exit_2_naming(code, out, err, path: str, fragment: str):
    assert code == 2, f"exit {code}\n{out}{err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert out == ""
    assert err.startswith("invalid "), err
    lines = [line for line in err.splitlines() if line.startswith(f"  - {path or '<root>'}: ")]
    assert lines, f"no problem at {path!r}:\n{err}"
    assert any(fragment in line for line in lines), f"{fragment!r} not in:\n" + "\n".join(lines)


# --- 1. the spec table, through the CLI ---------------------------------------------------------


@pytest.mark.parametrize("data, path, value, allowed", [c[1:5] for c in BAD], ids=[c[0] for c in BAD])
def test_spec_table_exits_2_through_the_cli(tmp_path, data, path, value, allowed):
    code, out, err = cli("plan", plan_file(tmp_path, data))
    assert_exit_2_naming(code, out, err, path, allowed)


# --- 2. what only the later stages catch, and the issue's cases ---------------------------------

# (id, data, path, fragment of the message)
STAGES = [
    # the issue's list, beyond BAD
    ("tpu-on-aws", pool(instance_type="v5p"), "pools[0].instance_type", "TPUs are GCP-only"),
    ("tpu-slice-on-aws", pool(instance_type="tpu-v5p-slice"), "pools[0].instance_type", "TPUs are GCP-only"),
    ("tpu-machine-type-on-aws", pool(instance_type="ct5p-hightpu-4t"), "pools[0].instance_type", "TPUs are GCP-only"),
    ("fsx-below-minimum", spec(storage=[{**FSX, "capacity_gib": 600}]), "storage[0].capacity_gib",
     "1200, 2400, then multiples of 2400"),
    ("managed-lustre-below-minimum", spec(GCP_MIN, storage=[{**FSX, "capacity_gib": 1200}]),
     "storage[0].capacity_gib", "at least 18000 GiB"),
    # sizing (design)
    ("fsx-not-a-step", spec(storage=[{**FSX, "capacity_gib": 3000}]), "storage[0].capacity_gib", "2400"),
    ("fsx-scratch-1-steps", spec(storage=[{**FSX, "capacity_gib": 4800, "deployment_type": "SCRATCH_1"}]),
     "storage[0].capacity_gib", "multiples of 3600"),
    ("fsx-throughput-tier", spec(storage=[{**FSX, "throughput_mbps_per_tib": 300}]),
     "storage[0].throughput_mbps_per_tib", "125, 250, 500, 1000"),
    ("fsx-persistent-1-tier", spec(storage=[{**FSX, "deployment_type": "PERSISTENT_1", "throughput_mbps_per_tib": 500}]),
     "storage[0].throughput_mbps_per_tib", "50, 100, 200"),
    ("scratch-takes-no-throughput", spec(storage=[{**FSX, "deployment_type": "SCRATCH_2", "throughput_mbps_per_tib": 200}]),
     "storage[0].throughput_mbps_per_tib", "leave it out"),
    ("managed-lustre-tier", spec(GCP_MIN, storage=[{**FSX, "capacity_gib": 18000, "throughput_mbps_per_tib": 300}]),
     "storage[0].throughput_mbps_per_tib", "Managed Lustre tier"),
    ("deployment-type-on-gcp", spec(GCP_MIN, storage=[{**FSX, "capacity_gib": 18000, "deployment_type": "SCRATCH_2"}]),
     "storage[0].deployment_type", "leave it out on gcp"),
    ("filestore-on-aws", spec(storage=[{**FSX, "type": "filestore"}]), "storage[0].type", "gcp only"),
    ("filestore-too-small", spec(GCP_MIN, storage=[{**FSX, "type": "filestore", "capacity_gib": 100}]),
     "storage[0].capacity_gib", "Filestore"),
    # scheduler sections
    ("slurm-section-on-kubernetes", spec(scheduler="kubernetes", slurm={"accounting": True}), "slurm", "leave it out"),
    ("kubernetes-section-on-slurm", spec(kubernetes={"namespace": "x"}), "kubernetes", "leave it out"),
    ("unknown-head-node-type", spec(slurm={"head_node": {"instance_type": "m5.large"}}),
     "slurm.head_node.instance_type", "controller type"),
    ("public-head-in-existing-vpc", spec(network={"existing": {"vpc_id": VPC, "subnet_id": SUBNET}},
                                         slurm={"head_node": {"public_ip": True}}), "slurm.head_node.public_ip", "false"),
    ("idle-time-zero", spec(slurm={"suspend_idle_min": 0}), "slurm.suspend_idle_min", ">= 1"),
    ("trainium-on-eks", spec(scheduler="kubernetes", pools=[{"name": "trn", "instance_type": "trainium2", "max_nodes": 2}]),
     "pools[0].instance_type", "NVIDIA GPU type"),
    ("eks-admin-not-an-arn", spec(scheduler="kubernetes", kubernetes={"admins": ["bob"]}), "kubernetes.admins[0]",
     "ARN"),
    ("flex-start-on-aws", pool(capacity="flex-start"), "pools[0].capacity.type", "on aws"),
    ("too-many-pools", spec(pools=[{"name": f"p{i}", "instance_type": "h100", "max_nodes": 1} for i in range(65)]),
     "pools", "at most 64"),
    ("ipv6-vpc", spec(network={"vpc_cidr": "fd00::/48"}), "network.vpc_cidr", "private IPv4"),
    ("aws-image-on-gcp", pool(GCP_MIN, image="ami-0123456789abcdef0"), "pools[0].image", "GCP image"),
    ("capacity-block-id-format", pool(capacity={"type": "capacity-block", "reservation_id": "cb-1"}),
     "pools[0].capacity.reservation_id", "cr-0123456789abcdef0"),
]


@pytest.mark.parametrize("data, path, fragment", [c[1:] for c in STAGES], ids=[c[0] for c in STAGES])
def test_later_stage_and_issue_cases_exit_2(tmp_path, data, path, fragment):
    code, out, err = cli("plan", plan_file(tmp_path, data))
    assert_exit_2_naming(code, out, err, path, fragment)


# Issue 8's list -> the case that covers it (BAD in tests/support/bad_specs.py, or STAGES here).
ISSUE_CASES = {
    "a negative node count": "negative-max-nodes",
    "min > max": "min-above-max",
    "an unknown instance type": "unknown-instance-type",
    "a TPU on AWS": "tpu-on-aws",
    "EFA on a type without it": "efa-on-gcp",          # and test_efa_on_a_type_without_it below
    "Lustre below the minimum": "fsx-below-minimum",
    "overlapping mounts": "overlapping-mounts",
    "a zone outside the region": "aws-zone-outside-region",
    "duplicate pool names": "duplicate-pool-names",
    "CIDRs that don't parse": "cidr-does-not-parse",
    "CIDRs that overlap": "ssh-cidrs-overlap",
}


def test_the_tables_hold_the_issue_cases_and_no_duplicates():
    ids = [c[0] for c in BAD] + [c[0] for c in STAGES]
    assert len(ids) == len(set(ids)) >= 40
    missing = {what: case for what, case in ISSUE_CASES.items() if case not in ids}
    assert not missing


# --- 3. the stack file and the provider ---------------------------------------------------------


def test_spec_region_other_than_the_stack_provider_region(tmp_path):
    path = plan_file(tmp_path, AWS_MIN, {"aws:region": "us-west-2"})
    assert_exit_2_naming(*cli("plan", path), "region", "aws:region (us-west-2)")


def test_gcp_spec_region_other_than_the_stack_provider_region(tmp_path):
    path = plan_file(tmp_path, GCP_MIN, {"gcp:region": "europe-west4", "gcp:project": "p"})
    assert_exit_2_naming(*cli("plan", path), "region", "gcp:region (europe-west4)")


@pytest.mark.parametrize("content, fragment", [
    ("config:\n  aws:region: us-east-1\n", "aicluster:cluster"),
    ("name: [unclosed\n", "valid YAML at line"),
    ("\tname: tab\n", "valid YAML"),
])
def test_broken_stack_files(tmp_path, content, fragment):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(content, encoding="utf-8")
    code, out, err = cli("plan", str(path))
    assert code == 2 and fragment in err and "Traceback" not in err, err


def test_efa_on_a_type_without_it(tmp_path, monkeypatch):
    """Every AWS type in the catalog has EFA, so this uses a copy of the catalog that also holds
    g5.xlarge (1 A10G, no EFA: moto's DescribeInstanceTypes has EfaSupported false)."""
    import aicluster.catalog as catalog_module
    from aicluster.catalog import load_catalog

    folder = tmp_path / "catalog"
    shutil.copytree(catalog_module._HERE, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    doc = yaml.safe_load((folder / "aws.yaml").read_text(encoding="utf-8"))
    doc["instance_types"]["g5.xlarge"] = {
        **doc["instance_types"]["g5.48xlarge"], "accelerator_count": 1, "vcpu": 4, "cores": 2, "memory_gib": 16,
        "network_gbps": 10, "network_cards": 1, "max_efa_interfaces": 0, "local_nvme_gb": 250,
        "source": "test fixture after moto's DescribeInstanceTypes (g5.xlarge: EfaSupported false)"}
    doc["instance_types"]["g5.xlarge"].pop("price", None)
    (folder / "aws.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    monkeypatch.setattr(catalog_module, "_HERE", folder)
    load_catalog.cache_clear()
    try:
        code, out, err = cli("plan", plan_file(tmp_path, pool(instance_type="g5.xlarge", efa=True)))
        assert_exit_2_naming(code, out, err, "pools[0].efa", "g5.xlarge has no EFA")
    finally:
        load_catalog.cache_clear()


def test_every_problem_is_reported_at_once(tmp_path):
    """Several mistakes in one file: one exit, each with its own path."""
    data = spec(zone="us-west-2a", pools=[{"name": "gpu", "instance_type": "v5p", "max_nodes": -1},
                                          {"name": "gpu", "instance_type": "h100", "max_nodes": 2,
                                           "capacity": {"type": "reservation", "reservation_id": CR}}])
    code, out, err = cli("plan", plan_file(tmp_path, data))
    assert code == 2
    assert "pools[0].max_nodes" in err
