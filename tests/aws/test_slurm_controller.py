"""aicluster:aws:SlurmController / SlurmConfiguration under mocks: the head node, the munge
secret, the published configuration and the head's least-privilege IAM."""
from __future__ import annotations

import base64
import copy
import json

import pytest

from aicluster.offline.capture import Secret, reveal
from aicluster.render.node_programs import artifact
from aicluster.render.slurm_files import published_archive
from tests.support.bucket_objects import as_bytes, body, s3_objects

INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
ZONE = "aws:route53/zone:Zone"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
POLICY = "aws:iam/rolePolicy:RolePolicy"


def head(plan):
    (instance,) = [r for r in plan.of_type(INSTANCE) if r.name.endswith("-head")]
    return instance


def head_template(plan):
    return plan.named("demo-slurm-head-template", LT)


def published(plan) -> dict[str, str]:
    return s3_objects(plan)


def fetch_list(user_data: str, path: str) -> dict:
    """The list of programs a node's user data fetches (aicluster-fetch's input)."""
    import yaml

    doc = yaml.safe_load(user_data)
    return json.loads(next(f["content"] for f in doc["write_files"] if f["path"] == path))


def policy(plan, suffix):
    (found,) = [r for r in plan.of_type(POLICY) if r.name.endswith(suffix)]
    return json.loads(found.inputs["policy"])


def test_head_node_is_private_imdsv2_encrypted_and_protected(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    node = head(plan)
    i = node.inputs
    lt = head_template(plan).inputs
    assert i["launchTemplate"] == {"id": head_template(plan).id, "version": "1"}
    assert i["instanceType"] == "m7i.2xlarge"
    assert lt["imageId"].startswith("resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/")
    assert i["associatePublicIpAddress"] is False
    assert i["subnetId"] == plan.named("demo-network-private", "aws:ec2/subnet:Subnet").id
    for meta in (i["metadataOptions"], lt["metadataOptions"]):
        assert (meta["httpTokens"], meta["httpPutResponseHopLimit"]) == ("required", 1)
    (root,) = lt["blockDeviceMappings"]
    # Encrypted gp3, kept when the instance is terminated (slurmctld state).
    assert root == {"deviceName": "/dev/sda1", "ebs": {"volumeSize": 100, "volumeType": "gp3", "encrypted": "true",
                                                       "deleteOnTermination": "false"}}
    assert i["disableApiTermination"] is True
    assert "networkInterfaces" not in i  # no EFA on the head node
    assert node.protect and node.retain_on_delete
    # A new Ubuntu release or a new template version never replaces it.
    assert {"ami", "launchTemplate"} <= set(node.ignore_changes)
    assert lt["tags"]["aicluster-role"] == "head"
    head_sg = plan.named("demo-slurm-head", "aws:ec2/securityGroup:SecurityGroup")
    assert head_sg.inputs.get("ingress", []) == []  # no SSH unless asked for
    assert head_sg.id in i["vpcSecurityGroupIds"]


def _aws_slurm_stacks():
    from tests.support import STACK_NAMES, stack_spec

    return [s for s in STACK_NAMES if stack_spec(s)["cloud"] == "aws" and stack_spec(s).get("scheduler", "slurm") == "slurm"]


@pytest.mark.parametrize("stack", [None, *_aws_slurm_stacks()])
def test_no_instance_combines_a_resolve_ssm_image_with_a_root_block_device(plan_spec, base_spec, stack):
    """terraform-provider-aws #43488 (open; pulumi-aws 7.x bridges provider 6.x): an aws_instance
    whose `ami` is "resolve:ssm:..." and that has a root_block_device fails at create with
    InvalidAMIID.Malformed (the provider calls DescribeImages on the string to find the root
    device). The head node takes its image and root volume from a launch template instead."""
    from tests.support.stack_plans import stack_plan

    plan = plan_spec(base_spec) if stack is None else stack_plan(stack)
    instances = plan.of_type(INSTANCE)
    assert instances
    for instance in instances:
        i = instance.inputs
        assert not (str(i.get("ami", "")).startswith("resolve:ssm:") and i.get("rootBlockDevice")), instance.name
        assert "rootBlockDevice" not in i and "ami" not in i, instance.name
        (template,) = [lt for lt in plan.of_type(LT) if lt.id == i["launchTemplate"]["id"]]
        # Ubuntu by its SSM parameter, or the baked node image's AMI (login nodes, slurm.node_image).
        assert template.inputs["imageId"].startswith(("resolve:ssm:", "ami-"))
        assert [m["ebs"]["encrypted"] for m in template.inputs["blockDeviceMappings"]] == ["true"]


def test_ssh_only_from_the_spec_cidrs(plan_spec, base_spec):
    base_spec["network"] = {"ssh_ingress_cidrs": ["203.0.113.0/24"]}
    plan = plan_spec(base_spec)
    (rule,) = plan.named("demo-slurm-head", "aws:ec2/securityGroup:SecurityGroup").inputs["ingress"]
    assert (rule["fromPort"], rule["toPort"], rule["cidrBlocks"]) == (22, 22, ["203.0.113.0/24"])


def test_public_head_goes_to_the_public_subnet(plan_spec, base_spec):
    base_spec["slurm"] = {"head_node": {"public_ip": True}}
    plan = plan_spec(base_spec)
    i = head(plan).inputs
    assert i["associatePublicIpAddress"] is True
    assert i["subnetId"] == plan.named("demo-network-public", "aws:ec2/subnet:Subnet").id


def test_munge_key_is_a_protected_secret(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    secret = plan.named("demo-slurm-munge", "aws:secretsmanager/secret:Secret")
    assert secret.inputs["name"] == "aicluster/demo/munge-key"
    version = plan.named("demo-slurm-munge-value", "aws:secretsmanager/secretVersion:SecretVersion")
    assert isinstance(version.inputs["secretString"], Secret)
    assert len(base64.b64decode(reveal(version.inputs["secretString"]))) == 1024
    for resource in (secret, version, plan.named("demo-slurm-munge-bytes")):
        assert resource.protect and resource.retain_on_delete


def test_no_secret_value_in_any_rendered_file_or_output(plan_spec, base_spec):
    from aicluster.commands.planner import rendered_files

    base_spec["slurm"] = {"accounting": True}
    plan = plan_spec(base_spec)
    secrets = [reveal(v) for r in plan.resources for v in {**r.inputs, **r.outputs}.values() if isinstance(v, Secret)]
    assert len(secrets) >= 2  # munge key and database password
    texts = list(rendered_files(plan).values()) + [json.dumps(plan.to_json())]
    for secret in secrets:
        for text in texts:
            assert str(secret) not in text


def test_published_slurm_conf_has_the_pool(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    files = published(plan)
    conf = files["head/slurm/slurm.conf"]
    assert "PartitionName=gpu Nodes=gpu-[1-16]" in conf
    assert "Gres=gpu:h100:8" in conf
    addr = head(plan).outputs["privateIp"]
    assert f"SlurmctldHost=demo-head({addr})" in conf
    cluster = json.loads(files["head/aicluster/cluster.json"])
    lt = plan.named("demo-gpu-template", "aws:ec2/launchTemplate:LaunchTemplate")
    assert cluster["pools"]["gpu"]["launch_template_id"] == lt.id
    assert cluster["pools"]["gpu"]["placement_group"] == plan.named("demo-gpu-placement").outputs["name"]
    manifest = json.loads(files["head/manifest.json"])
    # Every published file is in the manifest; the programs fetched at boot are not (they are named
    # by the user data of the head node, the compute nodes and the login nodes).
    assert {f"head/{e['key']}" for e in manifest["files"]} | {"head/manifest.json"} == {
        k for k in files if not k.startswith(("head/boot/", "compute/", "login/"))}
    assert {l["path"] for l in manifest["links"]} == {
        "/opt/aicluster/bin/aicluster-resume", "/opt/aicluster/bin/aicluster-suspend",
        "/opt/aicluster/bin/aicluster-resume-fail", "/opt/aicluster/bin/aicluster-reconcile"}


def test_head_fleet_permissions_are_scoped_to_the_cluster(plan_spec, base_spec):
    base_spec["pools"].append({"name": "b200", "instance_type": "b200", "max_nodes": 2})
    plan = plan_spec(base_spec)
    statements = {s["Sid"]: s for s in policy(plan, "-head-fleet")["Statement"]}
    lt_ids = sorted(r.id for r in plan.of_type(LT) if r.inputs["tags"]["aicluster-role"] == "compute")
    launch = statements["LaunchFromClusterTemplates"]["Resource"]
    assert sorted(arn.rsplit("/", 1)[1] for arn in launch) == lt_ids
    terminate = statements["TerminateClusterInstances"]
    assert terminate["Action"] == "ec2:TerminateInstances"
    assert terminate["Condition"] == {"StringEquals": {"aws:ResourceTag/aicluster-cluster": "demo"}}
    assert statements["PassComputeRole"]["Resource"] == plan.named("demo-compute-role").outputs["arn"]
    read = {s["Sid"]: s for s in policy(plan, "-head-read")["Statement"]}
    assert read["ReadClusterSecrets"]["Resource"].endswith(":secret:aicluster/demo/*")
    munge_read = policy(plan, "-compute-munge")["Statement"]
    assert [s["Resource"] for s in munge_read] == [plan.named("demo-slurm-munge").outputs["arn"]]
    for document in (policy(plan, "-head-fleet"), policy(plan, "-head-read"), policy(plan, "-compute-munge"),
                     policy(plan, "-head-dns"), policy(plan, "-compute-read")):
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert "*" not in actions and not any(a.endswith(":*") for a in actions)
            if statement["Resource"] == "*":
                assert all(a.startswith("ec2:Describe") for a in actions), statement


def test_head_writes_node_records_in_its_own_zone_only(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    zone = plan.named("demo-slurm-dns", ZONE)
    statements = {s["Sid"]: s for s in policy(plan, "-head-dns")["Statement"]}
    assert set(statements) == {"WriteNodeRecords", "ReadNodeRecords"}
    arn = f"arn:aws:route53:::hostedzone/{zone.outputs['zoneId']}"
    assert statements["WriteNodeRecords"]["Action"] == "route53:ChangeResourceRecordSets"
    assert statements["WriteNodeRecords"]["Resource"] == arn
    # A records only, written and deleted: never the zone's SOA or NS, never a CREATE of something else.
    assert statements["WriteNodeRecords"]["Condition"] == {"ForAllValues:StringEquals": {
        "route53:ChangeResourceRecordSetsRecordTypes": ["A"],
        "route53:ChangeResourceRecordSetsActions": ["UPSERT", "DELETE"]}}
    assert statements["ReadNodeRecords"] == {"Sid": "ReadNodeRecords", "Effect": "Allow",
                                             "Action": "route53:ListResourceRecordSets", "Resource": arn}
    role = plan.named("demo-slurm-head-dns", POLICY).inputs["role"]
    assert role == plan.named("demo-slurm-head-role").outputs["name"]
    others = [s for n in ("-head-fleet", "-head-read") for s in policy(plan, n)["Statement"]]
    assert not any("route53" in str(s["Action"]) for s in others)


def test_node_names_resolve_through_the_clusters_private_zone(plan_spec, base_spec):
    """cloud_dns: the zone (private, on the cluster's VPC), its id and domain in cluster.json for the
    power programs, and the domain searched on the head node and on every compute node."""
    import yaml

    plan = plan_spec(base_spec)
    zone = plan.named("demo-slurm-dns", ZONE)
    assert zone.inputs["name"] == "demo.aicluster.internal"
    assert zone.inputs["vpcs"] == [{"vpcId": plan.named("demo-network-vpc").id, "vpcRegion": "us-east-1"}]
    assert zone.inputs["forceDestroy"] is True           # records written at runtime never block a destroy
    assert zone.inputs["tags"]["aicluster-role"] == "control-plane"
    assert zone.inputs["tags"]["aicluster-cluster"] == "demo"
    assert not zone.protect                               # control plane, not data: rebuilt by the next resume
    cluster = json.loads(published(plan)["head/aicluster/cluster.json"])
    assert (cluster["hosted_zone_id"], cluster["dns_domain"]) == (zone.outputs["zoneId"], "demo.aicluster.internal")

    resolved = "[Resolve]\nDomains=demo.aicluster.internal\nCache=no-negative\n"
    head_doc = yaml.safe_load(head(plan).inputs["userData"])
    lt = plan.named("demo-gpu-template", "aws:ec2/launchTemplate:LaunchTemplate")
    node_doc = yaml.safe_load(base64.b64decode(lt.inputs["userData"]).decode())
    for doc in (head_doc, node_doc):
        files = {f["path"]: f["content"] for f in doc["write_files"]}
        assert resolved in files["/etc/systemd/resolved.conf.d/aicluster.conf"]
        assert doc["runcmd"][0] == ["systemctl", "try-restart", "systemd-resolved"]   # before slurmd/slurmctld


@pytest.mark.parametrize("edit", ["add a pool", "scale max_nodes", "enable accounting"])
def test_the_zone_follows_the_cluster_name_not_the_pools(plan_spec, base_spec, edit):
    before = plan_spec(base_spec).named("demo-slurm-dns", ZONE)
    changed = copy.deepcopy(base_spec)
    ROUTINE_EDITS[edit](changed)
    after = plan_spec(changed).named("demo-slurm-dns", ZONE)
    assert (after.urn, after.inputs) == (before.urn, before.inputs)


def test_compute_user_data_joins_the_controller(plan_spec, base_spec):
    import yaml

    plan = plan_spec(base_spec)
    lt = plan.named("demo-gpu-template", LT)
    text = base64.b64decode(lt.inputs["userData"]).decode()
    doc = yaml.safe_load(text)
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    env = files["/etc/aicluster/node.env"]
    assert f"AICLUSTER_CONTROLLER={head(plan).outputs['privateIp']}:6817" in env
    assert f"AICLUSTER_MUNGE_SECRET={plan.named('demo-slurm-munge').outputs['arn']}" in env
    assert "AICLUSTER_GPUS=8" in env and "AICLUSTER_FABRIC_DEVICES=32" in env
    # One NCCL env file: the TaskProlog gives it to every job, the profile to login shells.
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in files["/etc/aicluster/nccl.env"]
    assert ". /etc/aicluster/nccl.env" in files["/etc/profile.d/aicluster-nccl.sh"]
    listing = fetch_list(text, "/etc/aicluster/node-files.json")
    assert {f["path"] for f in listing["files"]} >= {
        "/opt/aicluster/bin/aicluster-secret", "/opt/aicluster/bin/aicluster-node-bootstrap",
        "/opt/aicluster/bin/aicluster-gpu-healthcheck", "/usr/local/sbin/aicluster-mount-storage",
        "/opt/aicluster/bin/aicluster-resume-job", "/opt/aicluster/bin/aicluster-task-prolog"}
    assert doc["runcmd"][-1][-1].endswith(
        "exec /opt/aicluster/bin/aicluster-node-bootstrap --mount /usr/local/sbin/aicluster-mount-storage")


def test_programs_are_fetched_from_the_bucket_at_content_addressed_keys(plan_spec, base_spec):
    """The head's and the nodes' user data list their programs by key and SHA-256; each key holds
    exactly that content (the planned object), in the private, encrypted configuration bucket."""
    import hashlib

    plan = plan_spec(base_spec)
    bucket = plan.named("demo-slurm-config", "aws:s3/bucket:Bucket").outputs["bucket"]
    objects = {r.inputs["key"]: r for r in plan.of_type(OBJECT)}
    node_text = base64.b64decode(plan.named("demo-gpu-template", LT).inputs["userData"]).decode()
    lists = {"head/boot/": fetch_list(head(plan).inputs["userData"], "/etc/aicluster/head-files.json"),
             "compute/": fetch_list(node_text, "/etc/aicluster/node-files.json")}
    boot_archive = artifact(["aicluster-sync", "aicluster-secret", "aicluster-install-slurm"])   # the head boot programs
    archive = f"/opt/aicluster/lib/{boot_archive.name}"
    assert {f["path"] for f in lists["head/boot/"]["files"]} == {
        "/opt/aicluster/bin/aicluster-sync", "/opt/aicluster/bin/aicluster-secret",
        "/opt/aicluster/bin/aicluster-install-slurm", archive}   # the archive they run
    for prefix, listing in lists.items():
        assert (listing["bucket"], listing["region"]) == (bucket, "us-east-1")
        for entry in listing["files"]:
            obj = objects[entry["key"]]
            content = body(obj)
            module = entry["path"].startswith("/opt/aicluster/lib/")
            name = entry["path"].rsplit("/", 1)[1]
            # the key ends in the content's SHA-256, the pin aicluster-fetch checks (not repeated beside it)
            assert entry["key"] == f"{prefix}{name}/{hashlib.sha256(as_bytes(content)).hexdigest()}"
            assert "sha256" not in entry
            assert obj.inputs["bucket"] == bucket and obj.inputs["serverSideEncryption"] == "AES256"
            assert obj.retain_on_delete   # a node launched from an older template version may still fetch it
            assert entry["mode"] == ("0644" if module else "0755")
    # The archive travels as bytes (S3 stores content_base64 decoded), exactly the built archive.
    packed = next(f for f in lists["head/boot/"]["files"] if f["path"] == archive)
    assert body(objects[packed["key"]]) == boot_archive.data and "content" not in objects[packed["key"]].inputs
    entry_point = next(f for f in lists["head/boot/"]["files"] if f["path"].endswith("/aicluster-sync"))
    assert f'"$lib/{boot_archive.name}" aicluster-sync "$0"' in body(objects[entry_point["key"]])
    # The head node launches once its programs and its read permission exist; the nodes' templates
    # name their programs once those exist.
    deps = head(plan).dependencies
    assert {objects[f["key"]].urn for f in lists["head/boot/"]["files"]} <= set(deps)
    assert plan.named("demo-slurm-head-read", POLICY).urn in deps
    assert {objects[f["key"]].urn for f in lists["compute/"]["files"]} <= set(
        plan.named("demo-gpu-template", LT).dependencies)


def test_compute_nodes_read_only_their_programs(plan_spec, base_spec):
    """Least privilege: s3:GetObject on the compute/ prefix of the cluster's bucket and on pyxis as
    the head built it (artifacts/pyxis/), nothing else (not the head's configuration, not
    cluster.json, no listing, no write)."""
    plan = plan_spec(base_spec)
    bucket_arn = plan.named("demo-slurm-config", "aws:s3/bucket:Bucket").outputs["arn"]
    read = plan.named("demo-slurm-node-files-compute-read", POLICY)
    assert read.inputs["role"] == plan.named("demo-compute-role").outputs["name"]
    assert json.loads(read.inputs["policy"])["Statement"] == [
        {"Sid": "ReadNodePrograms", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket_arn}/compute/*"},
        {"Sid": "ReadPyxis", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket_arn}/artifacts/pyxis/*"}]
    compute_role = plan.named("demo-compute-role").outputs["name"]
    s3_statements = [st for r in plan.of_type(POLICY) if r.inputs["role"] == compute_role
                     for st in json.loads(r.inputs["policy"])["Statement"] if "s3:" in str(st["Action"])]
    assert len(s3_statements) == 2


ROUTINE_EDITS = {
    "scale max_nodes": lambda s: s["pools"][0].update(max_nodes=64),
    "change min_nodes": lambda s: s["pools"][0].update(min_nodes=2),
    "add a pool": lambda s: s["pools"].append({"name": "b200", "instance_type": "b200", "max_nodes": 4}),
    "change instance type": lambda s: s["pools"][0].update(instance_type="p5en.48xlarge"),
    "idle time": lambda s: s.setdefault("slurm", {}).update(suspend_idle_min=45),
    "enable accounting": lambda s: s.setdefault("slurm", {}).update(accounting=True),
    "tags on pools' side": lambda s: s["pools"][0].update(capacity="spot"),
}


@pytest.mark.parametrize("edit", list(ROUTINE_EDITS))
def test_routine_edits_leave_the_head_node_untouched(plan_spec, base_spec, edit):
    """Same URN, same inputs (user data byte-identical): `pulumi up` neither stops nor replaces it."""
    before_plan = plan_spec(base_spec)
    changed = copy.deepcopy(base_spec)
    ROUTINE_EDITS[edit](changed)
    after_plan = plan_spec(changed)
    before, after = head(before_plan), head(after_plan)
    assert after.urn == before.urn
    assert after.inputs == before.inputs
    # Nor its launch template (a new version would be a new head node) or its programs.
    assert head_template(after_plan).inputs == head_template(before_plan).inputs
    boot = {r.name: r.inputs for r in before_plan.of_type(OBJECT) if r.inputs["key"].startswith("head/boot/")}
    assert len(boot) == 4              # aicluster-sync, -secret, -install-slurm, and the archive they run
    assert boot == {r.name: r.inputs for r in after_plan.of_type(OBJECT) if r.inputs["key"].startswith("head/boot/")}


def test_head_node_does_not_wait_for_the_filesystems(plan_spec, base_spec):
    """No filesystem output reaches the head node: it is created while FSx still is, and adding a
    filesystem leaves it untouched. Its mounts arrive with the published configuration, whose
    manifest runs the mount script (ParallelCluster #4211: the head node timed out waiting on FSx)."""
    plan = plan_spec(base_spec)
    node = head(plan)
    fs = plan.named("demo-fsx-fs", "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.urn not in node.dependencies
    assert fs.outputs["dnsName"] not in base64.b64decode(node.inputs["userData"]).decode() \
        if not node.inputs["userData"].startswith("#cloud-config") else fs.outputs["dnsName"] not in node.inputs["userData"]
    files = published(plan)
    script = files["head/bin/aicluster-mount-storage"]
    assert f"{fs.outputs['dnsName']}@tcp:/{fs.outputs['mountName']}" in script
    manifest = json.loads(files["head/manifest.json"])
    (entry,) = [e for e in manifest["files"] if e["key"] == "bin/aicluster-mount-storage"]
    assert entry["run"] == [entry["path"]] and entry["mode"] == "0755"
    assert entry["path"] == "/usr/local/sbin/aicluster-mount-storage"        # as on the nodes and on GCP
    # The archive the power program runs is read, not run (0644, as on GCP).
    modes = {e["path"]: e["mode"] for e in manifest["files"]}
    archive = published_archive(["aicluster-power.py"]).name
    assert (modes[f"/opt/aicluster/lib/{archive}"], modes["/opt/aicluster/bin/aicluster-power.py"]) == \
        ("0644", "0755")

    more = copy.deepcopy(base_spec)
    more["storage"].append({"name": "data", "type": "lustre", "mount": "/data", "capacity_gib": 1200})
    after = plan_spec(more)
    assert head(after).inputs == node.inputs
    assert "/data" in published(after)["head/bin/aicluster-mount-storage"]


def test_the_policy_pack_judges_a_head_node_launched_from_a_template(plan_spec, base_spec):
    """The pack reads raw resources: the head's IMDSv2 and root volume encryption are judged on its
    launch template (and IMDSv2 on the instance too), its size on the instance. A sizing row the
    head does not meet shows the head is found, not skipped."""
    from aicluster.offline.policy_bridge import load_rules, resolve_config, run_policies

    plan = plan_spec(base_spec)
    policies = [r.POLICY for r in load_rules()]
    verdicts = {v.rule_id: v for v in run_policies(plan, resolve_config(policies))}
    for rule in ("AIC-SEC-001", "AIC-SEC-003", "AIC-SEC-005", "AIC-CMP-002"):
        assert verdicts[rule].status == "pass" and not verdicts[rule].not_applicable, (rule, verdicts[rule].violations)
    strict = resolve_config(policies, {"AIC-CMP-002": {"sizing": [{"maxNodes": 1000000, "minVcpu": 64,
                                                                   "minMemoryGib": 256}]}})
    (cmp,) = [v for v in run_policies(plan, strict) if v.rule_id == "AIC-CMP-002"]
    assert [v.message for v in cmp.violations] == [
        "head node demo-slurm-head: m7i.2xlarge has 8 vCPU / 32 GiB; 16 compute nodes (up to 1000000) need "
        ">= 64 vCPU / 256 GiB"]
