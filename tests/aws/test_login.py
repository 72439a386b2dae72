"""aicluster:aws:LoginNodes under mocks: private, IMDSv2, encrypted, SSH only from the spec's
CIDRs, least-privilege IAM, user data that joins Slurm with sackd and no slurmd; and the spec's
`slurm.login` section (count 0, a bad type)."""
from __future__ import annotations

import copy
import hashlib
import json

import pytest
import yaml

from aicluster.errors import SpecError
from aicluster.offline.capture import reveal
from aicluster.render.node_programs import NODE_PROGRAMS, artifact
from tests.support.bucket_objects import as_bytes, s3_objects
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, run_spec

INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SG = "aws:ec2/securityGroup:SecurityGroup"
POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACH = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"


def spec(**login) -> dict:
    out = copy.deepcopy(BASE_SPEC)
    if login:
        out["slurm"] = {"login": login}
    return out


def logins(plan):
    return [r for r in plan.of_type(INSTANCE) if r.name.startswith("demo-login-")]


@pytest.fixture(scope="module")
def plan():
    return run_spec(spec())


def test_one_login_node_by_default_private_imdsv2_encrypted_not_protected(plan):
    (node,) = logins(plan)
    i = node.inputs
    lt = plan.named("demo-login-template", LT).inputs
    assert i["instanceType"] == "m7i.2xlarge"
    assert i["associatePublicIpAddress"] is False
    assert i["subnetId"] == plan.named("demo-network-private", "aws:ec2/subnet:Subnet").id
    for meta in (i["metadataOptions"], lt["metadataOptions"]):
        assert (meta["httpTokens"], meta["httpPutResponseHopLimit"]) == ("required", 1)
    (root,) = lt["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] == "true" and root["ebs"]["volumeSize"] == 100
    assert lt["imageId"].startswith("resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/")
    # Not stateful: neither protected nor retained; a new AMI or template version never replaces it.
    assert not node.protect and not node.retain_on_delete
    assert {"ami", "launchTemplate"} <= set(node.ignore_changes)
    assert i["tags"]["aicluster-role"] == "login" and i["tags"]["Name"] == "demo-login-1"
    nodes_sg = plan.named("demo-network-nodes", SG).id
    assert nodes_sg in i["vpcSecurityGroupIds"]


def test_no_ssh_ingress_unless_the_spec_names_cidrs(plan):
    assert plan.named("demo-login-ssh", SG).inputs.get("ingress", []) == []
    with_ssh = copy.deepcopy(BASE_SPEC)
    with_ssh["network"] = {"ssh_ingress_cidrs": ["192.0.2.0/24"]}
    ingress = run_spec(with_ssh).named("demo-login-ssh", SG).inputs["ingress"]
    assert [(r["protocol"], r["fromPort"], r["toPort"], r["cidrBlocks"]) for r in ingress] == \
        [("tcp", 22, 22, ["192.0.2.0/24"])]


def test_role_reads_the_munge_key_its_programs_and_exactly_the_published_files_it_fetches(plan):
    (read,) = [r for r in plan.of_type(POLICY) if r.name == "demo-login-read"]
    statements = json.loads(read.inputs["policy"])["Statement"]
    munge = plan.named("demo-slurm-munge", "aws:secretsmanager/secret:Secret")
    bucket = plan.named("demo-slurm-config", "aws:s3/bucket:Bucket").outputs["arn"]
    # Each of the head's objects by its exact key, never head/* (slurm.conf, the manifest, the
    # power program): the mount script, the fabric check and the facts it reads; and pyxis as the
    # head built it (node_local_files), never the head's other artifacts.
    assert [(s["Action"], s["Resource"]) for s in statements] == [
        ("secretsmanager:GetSecretValue", munge.outputs["arn"]),
        ("s3:GetObject", [f"{bucket}/login/*", f"{bucket}/head/bin/aicluster-mount-storage",
                          f"{bucket}/head/bin/aicluster-nccl-check", f"{bucket}/head/aicluster/cluster.json"]),
        ("s3:GetObject", f"{bucket}/artifacts/pyxis/*")]


def test_the_keys_the_login_node_reads_are_the_ones_the_head_publishes_and_its_user_data_names(plan):
    from aicluster.render.login_files import HEAD_KEYS_READ

    published = {r.inputs["key"] for r in plan.of_type(OBJECT)}
    assert set(HEAD_KEYS_READ) <= published
    (node,) = logins(plan)
    doc = yaml.safe_load(reveal(node.inputs["userData"]))
    env = next(f["content"] for f in doc["write_files"] if f["path"] == "/etc/aicluster/login.env")
    named = {line.split("=", 1)[1] for line in env.splitlines() if line.endswith(HEAD_KEYS_READ)}
    assert named == set(HEAD_KEYS_READ)
    # The timer that keeps them current (a pool or filesystem added later) is the bootstrap's --refresh.
    units = {f["path"]: f["content"] for f in doc["write_files"] if f["path"].startswith("/etc/systemd/")}
    assert "ExecStart=/opt/aicluster/bin/aicluster-login-bootstrap --refresh" in \
        units["/etc/systemd/system/aicluster-login-refresh.service"]
    assert "OnUnitActiveSec=5min" in units["/etc/systemd/system/aicluster-login-refresh.timer"]
    attached = [r.inputs["policyArn"] for r in plan.of_type(ATTACH) if r.name.startswith("demo-login-")]
    assert attached == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]


def test_user_data_fetches_exactly_the_programs_in_the_bucket(plan):
    (node,) = logins(plan)
    doc = yaml.safe_load(reveal(node.inputs["userData"]))
    listing = json.loads(next(f["content"] for f in doc["write_files"] if f["path"] == "/etc/aicluster/login-files.json"))
    objects = {key: body for key, body in s3_objects(plan).items() if key.startswith("login/")}
    assert sorted(e["key"] for e in listing["files"]) == sorted(objects)
    for entry in listing["files"]:
        assert hashlib.sha256(as_bytes(objects[entry["key"]])).hexdigest() == entry["sha256"]
    assert {e["path"] for e in listing["files"]} == {*(f"/opt/aicluster/bin/{p}" for p in NODE_PROGRAMS),
                                                     # the archive of aicluster.node they run
                                                     f"/opt/aicluster/lib/{artifact(NODE_PROGRAMS).name}",
                                                     "/opt/aicluster/bin/aicluster-login-bootstrap",
                                                     "/opt/aicluster/bin/aicluster-containers",
                                                     # what watches the node (slurm_monitoring)
                                                     "/opt/aicluster/bin/aicluster-monitoring",
                                                     "/opt/aicluster/bin/aicluster-node-metrics"}
    assert doc["runcmd"][-1] == ["sh", "-ec", "/opt/aicluster/bin/aicluster-fetch /etc/aicluster/login-files.json; "
                                              "exec /opt/aicluster/bin/aicluster-login-bootstrap"]


def test_slurm_conf_never_names_a_login_node(plan):
    conf = [reveal(r.inputs["content"]) for r in plan.of_type(OBJECT)
            if r.inputs["key"] == "head/slurm/slurm.conf"]
    nodes = [line for line in conf[0].splitlines() if line.startswith(("NodeName=", "PartitionName=", "SwitchName="))]
    assert nodes and not [line for line in nodes if "login" in line]


def test_count_two_makes_two_named_nodes_and_zero_makes_nothing():
    two = run_spec(spec(count=2))
    assert [r.inputs["tags"]["Name"] for r in logins(two)] == ["demo-login-1", "demo-login-2"]
    none = run_spec(spec(count=0))
    assert not [r for r in none.resources if r.name.startswith("demo-login")]


def test_instance_type_is_a_controller_type_or_a_spec_error_with_a_close_match():
    assert logins(run_spec(spec(instance_type="m7i.xlarge")))[0].inputs["instanceType"] == "m7i.xlarge"
    with pytest.raises(SpecError) as err:
        parse_spec(spec(instance_type="m7i.2xlarg"))
    (problem,) = err.value.problems
    assert problem.path == "slurm.login.instance_type"
    assert problem.value == "m7i.2xlarg" and problem.suggestion == "m7i.2xlarge"
    assert "controller type" in problem.allowed


@pytest.mark.parametrize("bad, path", [({"count": -1}, "slurm.login.count"), ({"count": "1"}, "slurm.login.count"),
                                       ({"cont": 1}, "slurm.login.cont")])
def test_bad_login_sections_are_spec_errors(bad, path):
    with pytest.raises(SpecError) as err:
        parse_spec(spec(**bad))
    assert [p.path for p in err.value.problems] == [path]


def test_the_plan_of_aws_p5_slurm_shows_its_login_nodes():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    lines = text(stack_result("aws-p5-slurm"))
    at = lines.index("Login nodes")
    assert lines[at + 1].startswith("  1 x m7i.2xlarge: p5-train-login-1;")
    assert "SSM Session Manager" in lines[at + 2]
    assert any("aicluster:aws:LoginNodes  p5-train-login" in line for line in lines)


def test_user_data_joins_with_sackd_never_slurmd_and_holds_no_secret(plan):
    from aicluster.catalog.slurm_release import slurm_release

    (node,) = logins(plan)
    text = reveal(node.inputs["userData"])
    doc = yaml.safe_load(text)
    names = {p[0] if isinstance(p, list) else p for p in doc["packages"]}
    assert {"munge", "python3-boto3"} <= names and not {"slurmd", "slurmctld", "slurm-client", "sackd"} & names
    env = next(f["content"] for f in doc["write_files"] if f["path"] == "/etc/aicluster/login.env")
    # The one pinned Slurm of the head and compute nodes (catalog/slurm_release.yaml), which the
    # bootstrap builds with aicluster-install-slurm (sackd among it).
    r = slurm_release()
    assert f"AICLUSTER_SLURM_VERSION={r.version}\n" in env and f"AICLUSTER_SLURM_SHA256={r.sha256}\n" in env
    head_ip = plan.named("demo-slurm-head", INSTANCE).outputs["privateIp"]
    assert f"AICLUSTER_CONTROLLER={head_ip}:6817" in env
    assert "AICLUSTER_MUNGE_SECRET=arn:aws:secretsmanager:" in env
    munge = reveal(plan.named("demo-slurm-munge-bytes", "random:index/randomBytes:RandomBytes").outputs["base64"])
    assert munge and munge not in text
    bootstrap = next(reveal(r.inputs["content"]) for r in plan.of_type(OBJECT)
                     if r.inputs["key"].startswith("login/aicluster-login-bootstrap/"))
    assert "ExecStart=/usr/sbin/sackd --systemd --conf-server $controller" in bootstrap
    code = [line for line in bootstrap.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "slurmd" in line]          # no slurmd started, enabled or installed
    assert not [c for c in doc["runcmd"] if "slurmd" in str(c)]
    assert len(text.encode()) <= 16384 - 6144     # the headroom tests/aws/test_user_data_size.py asks for


def test_login_nodes_install_containers_with_the_compute_nodes_own_program(plan):
    """The same enroot and pyxis as the compute nodes: the same program text, so one pin in
    catalog/node_local.yaml moves both."""
    from aicluster.render.node_local_files import node_local_programs

    (node,) = logins(plan)
    listing = json.loads(next(f["content"] for f in yaml.safe_load(reveal(node.inputs["userData"]))["write_files"]
                              if f["path"] == "/etc/aicluster/login-files.json"))
    (entry,) = [e for e in listing["files"] if e["path"] == "/opt/aicluster/bin/aicluster-containers"]
    (obj,) = [r for r in plan.of_type(OBJECT) if r.inputs["key"] == entry["key"]]
    assert reveal(obj.inputs["content"]) == node_local_programs()["aicluster-containers"]
