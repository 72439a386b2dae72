"""aicluster:aws:LustreFilesystem under mocks: sizing inputs, protection, independence from pools."""
from __future__ import annotations

import copy

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def test_fsx_persistent_2_is_protected_and_retained(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    fs = plan.named("demo-fsx-fs", FSX)
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["storageCapacity"] == 24000
    assert fs.inputs["perUnitStorageThroughput"] == 500
    assert fs.inputs["subnetIds"] == plan.named("demo-network-private", "aws:ec2/subnet:Subnet").id
    assert fs.inputs["securityGroupIds"] == [plan.named("demo-network-storage", "aws:ec2/securityGroup:SecurityGroup").id]
    assert fs.inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert fs.inputs["skipFinalBackup"] is False
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["tags"]["aicluster-role"] == "storage"
    assert plan.of_type(DRA) == []


def test_protect_false_opts_out(plan_spec, base_spec):
    base_spec["storage"][0]["protect"] = False
    fs = plan_spec(base_spec).named("demo-fsx-fs", FSX)
    assert not fs.protect and not fs.retain_on_delete


def test_import_path_links_s3_through_a_protected_association(plan_spec, base_spec):
    base_spec["storage"][0]["import_path"] = "s3://datasets/tokens"
    plan = plan_spec(base_spec)
    fs = plan.named("demo-fsx-fs", FSX)
    (dra,) = plan.of_type(DRA)
    assert dra.inputs["fileSystemId"] == fs.id
    assert dra.inputs["dataRepositoryPath"] == "s3://datasets/tokens"
    assert dra.inputs["deleteDataInFilesystem"] is False
    assert dra.protect and dra.retain_on_delete
    assert "importPath" not in fs.inputs  # PERSISTENT_2 links through the association only
    assert fs.inputs["skipFinalBackup"] is True  # FSx takes no final backup of S3-linked systems


def test_scratch_takes_no_per_unit_throughput(plan_spec, base_spec):
    fs_spec = base_spec["storage"][0]
    fs_spec.update(deployment_type="SCRATCH_2", capacity_gib=2400)
    del fs_spec["throughput_mbps_per_tib"]
    fs = plan_spec(base_spec).named("demo-fsx-fs", FSX)
    assert fs.inputs["deploymentType"] == "SCRATCH_2"
    assert "perUnitStorageThroughput" not in fs.inputs


def test_filesystem_inputs_do_not_depend_on_pools(plan_spec, base_spec):
    """Scaling, adding or changing pools leaves the filesystem's inputs and options unchanged."""
    def fsx_state(spec):
        fs = plan_spec(spec).named("demo-fsx-fs", FSX)
        return fs.urn, fs.inputs, fs.protect, fs.retain_on_delete

    before = fsx_state(base_spec)
    edits = []
    bigger = copy.deepcopy(base_spec); bigger["pools"][0]["max_nodes"] = 512; edits.append(bigger)
    added = copy.deepcopy(base_spec); added["pools"].append({"name": "b200", "instance_type": "b200", "max_nodes": 4}); edits.append(added)
    changed = copy.deepcopy(base_spec); changed["pools"][0]["instance_type"] = "p5en.48xlarge"; edits.append(changed)
    mins = copy.deepcopy(base_spec); mins["pools"][0]["min_nodes"] = 4; edits.append(mins)
    for edit in edits:
        assert fsx_state(edit) == before
