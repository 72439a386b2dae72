"""aicluster:aws:GpuPool under mocks: the inputs the launch template and placement group receive."""
from __future__ import annotations

import base64
import hashlib
import json

import pytest
import yaml

from tests.support.bucket_objects import s3_objects

LT = "aws:ec2/launchTemplate:LaunchTemplate"
PG = "aws:ec2/placementGroup:PlacementGroup"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"


def template(plan, pool="gpu"):
    return plan.named(f"demo-{pool}-template", LT).inputs


@pytest.mark.parametrize("itype, devices", [
    ("p4d.24xlarge", 4), ("p5.48xlarge", 32), ("p5en.48xlarge", 16), ("p6-b200.48xlarge", 8), ("trn1n.32xlarge", 16),
])
def test_launch_template_wires_every_efa_device(plan_spec, base_spec, itype, devices):
    base_spec["pools"][0]["instance_type"] = itype
    plan = plan_spec(base_spec)
    nics = template(plan)["networkInterfaces"]
    assert len(nics) == devices + 1
    primary = nics[0]
    assert (primary["networkCardIndex"], primary["deviceIndex"], primary["interfaceType"]) == (0, 0, "interface")
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa) == devices
    assert sorted(n["networkCardIndex"] for n in efa) == list(range(devices))
    for nic in efa:
        assert nic["deviceIndex"] == (1 if nic["networkCardIndex"] == 0 else 0)


def test_launch_template_is_private_encrypted_and_imdsv2(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    lt = template(plan)
    subnet = plan.named("demo-network-private", "aws:ec2/subnet:Subnet")
    nodes_sg = plan.named("demo-network-nodes", "aws:ec2/securityGroup:SecurityGroup")
    for nic in lt["networkInterfaces"]:
        assert nic["associatePublicIpAddress"] == "false"
        assert nic["deleteOnTermination"] == "true"
        assert nic["subnetId"] == subnet.id
        assert nic["securityGroups"] == [nodes_sg.id]
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = lt["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/sda1"
    assert root["ebs"] == {"deleteOnTermination": "true", "encrypted": "true", "volumeSize": 200, "volumeType": "gp3"}
    assert lt["instanceType"] == "p5.48xlarge"
    assert lt["imageId"] == ("resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
                             "base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id")
    profile = plan.named("demo-compute-profile", "aws:iam/instanceProfile:InstanceProfile")
    assert lt["iamInstanceProfile"]["arn"] == profile.outputs["arn"]
    assert lt["tags"]["aicluster-cluster"] == "demo"
    assert lt["tags"]["aicluster-role"] == "compute"
    assert lt["tags"]["aicluster-pool"] == "gpu"
    assert {t["resourceType"] for t in lt["tagSpecifications"]} == {"instance", "volume", "network-interface"}


def test_multi_node_pool_gets_a_cluster_placement_group(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    (pg,) = plan.of_type(PG)
    assert pg.inputs["strategy"] == "cluster"
    lt = template(plan)
    assert lt["placement"]["groupName"] == pg.outputs["name"]
    assert lt["placement"]["availabilityZone"] == "us-east-1a"
    assert "instanceMarketOptions" not in lt
    assert lt["capacityReservationSpecification"] == {"capacityReservationPreference": "open"}


def test_single_node_pool_has_no_placement_group(plan_spec, base_spec):
    base_spec["pools"][0]["max_nodes"] = 1
    plan = plan_spec(base_spec)
    assert plan.of_type(PG) == []
    assert "groupName" not in template(plan)["placement"]


def test_spot_pool(plan_spec, base_spec):
    base_spec["pools"][0]["capacity"] = "spot"
    lt = template(plan_spec(base_spec))
    assert lt["instanceMarketOptions"]["marketType"] == "spot"
    assert lt["capacityReservationSpecification"] == {"capacityReservationPreference": "none"}


@pytest.mark.parametrize("kind", ["capacity-block", "reservation"])
def test_reserved_capacity_targets_the_reservation_without_a_placement_group(plan_spec, base_spec, kind):
    base_spec["pools"][0]["capacity"] = {"type": kind, "reservation_id": "cr-0123456789abcdef0"}
    plan = plan_spec(base_spec)
    lt = template(plan)
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationId": "cr-0123456789abcdef0"}
    assert plan.of_type(PG) == []
    if kind == "capacity-block":
        assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    else:
        assert "instanceMarketOptions" not in lt


def test_user_data_mounts_the_filesystem_from_its_outputs(plan_spec, base_spec):
    """The mount script is not in the user data (EC2: 16 KB): the user data pins it by key and
    SHA-256, and the object at that key mounts the filesystem from its outputs."""
    plan = plan_spec(base_spec)
    fs = plan.named("demo-fsx-fs", "aws:fsx/lustreFileSystem:LustreFileSystem")
    text = base64.b64decode(template(plan)["userData"]).decode()
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    assert "/usr/local/sbin/aicluster-mount-storage" not in files
    listing = json.loads(files["/etc/aicluster/node-files.json"])
    (entry,) = [f for f in listing["files"] if f["path"] == "/usr/local/sbin/aicluster-mount-storage"]
    objects = s3_objects(plan)
    script = objects[entry["key"]]
    assert hashlib.sha256(script.encode()).hexdigest() == entry["key"].rsplit("/", 1)[1]
    assert f"mount_one '{fs.outputs['dnsName']}@tcp:/{fs.outputs['mountName']}' '/fsx' 'lustre'" in script
    assert "AICLUSTER_FABRIC_DEVICES=32" in text
    # Fetch, then storage, then Slurm, each only if the one before succeeded (sh -e; the bootstrap
    # runs the mount, so a failed mount's reason is reported): a job must never start on a node
    # without its filesystem. Before all, the node starts searching the cluster's node-name domain.
    assert doc["runcmd"] == [
        ["systemctl", "try-restart", "systemd-resolved"],
        ["sh", "-ec", "/opt/aicluster/bin/aicluster-fetch /etc/aicluster/node-files.json; "
                      "exec /opt/aicluster/bin/aicluster-node-bootstrap --mount /usr/local/sbin/aicluster-mount-storage"]]


def test_user_data_over_the_ec2_limit_is_refused_at_plan_time():
    """EC2 refuses user data over 16384 bytes (raw, before base64); a launch template would take it
    and every launch from it would fail. GpuPool (and the head node) refuse it when planning."""
    from aicluster.aws.gpu_pool import within_user_data_limit
    from aicluster.catalog import load_limits

    assert load_limits()["ec2_user_data_bytes"].value == 16384
    fits = "#cloud-config\n" + "#" * (16384 - len("#cloud-config\n"))
    assert within_user_data_limit("lt", fits) == fits
    with pytest.raises(ValueError, match="16385 bytes; EC2 takes at most 16384"):
        within_user_data_limit("lt", fits + "#")
    with pytest.raises(ValueError):   # bytes, not characters
        within_user_data_limit("lt", "é" * 8193)


def test_pool_size_does_not_change_resources(plan_spec, base_spec):
    """A 2048-node pool yields the same resources as an 8-node pool. What differs is data, not
    structure: the size tag on the launch template and the published Slurm files (in-place
    updates, never replacements)."""
    plans = {}
    for nodes in (8, 2048):
        spec = {**base_spec, "pools": [{**base_spec["pools"][0], "max_nodes": nodes}]}
        plans[nodes] = {(r.type, r.name): r.inputs for r in plan_spec(spec).custom_resources()}
    assert plans[8].keys() == plans[2048].keys()
    differing = {key for key in plans[8] if plans[8][key] != plans[2048][key]}
    assert {t for t, _ in differing} <= {LT, "aws:s3/bucketObjectv2:BucketObjectv2"}
    lt_key = next(k for k in differing if k[0] == LT)
    small, large = plans[8][lt_key], plans[2048][lt_key]
    assert (small["tags"]["aicluster-max-nodes"], large["tags"]["aicluster-max-nodes"]) == ("8", "2048")
    assert {k: v for k, v in small.items() if k != "tags"} == {k: v for k, v in large.items() if k != "tags"}


def test_every_pool_gets_its_own_template(plan_spec, base_spec):
    base_spec["pools"].append({"name": "infer", "instance_type": "g6e.48xlarge", "max_nodes": 2, "efa": False})
    plan = plan_spec(base_spec)
    assert len([lt for lt in plan.of_type(LT) if lt.inputs["tags"]["aicluster-role"] == "compute"]) == 2
    infer = template(plan, "infer")
    assert [n["interfaceType"] for n in infer["networkInterfaces"]] == ["interface"]
