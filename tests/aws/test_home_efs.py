"""aicluster:aws:HomeFilesystem: the shared /home of an AWS Slurm cluster on Amazon EFS, under mocks
(resource fields, network access, protection), in the mount script every node runs, in the spec's
errors, the plan, the balance and the policy pack."""
from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest

from aicluster import cli
from aicluster.design.balance import from_design
from aicluster.catalog.efs import load_efs
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.mounts import Mount
from aicluster.offline.capture import reveal
from aicluster.commands.plan_report import _storage_line
from aicluster.render.templates import render
from aicluster.spec.cluster import parse_spec
from aicluster.design.stateful import stateful_kind
from tests.support.bucket_objects import s3_objects

EFS = "aws:efs/fileSystem:FileSystem"
TARGET = "aws:efs/mountTarget:MountTarget"
BACKUP = "aws:efs/backupPolicy:BackupPolicy"
SG = "aws:ec2/securityGroup:SecurityGroup"
RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
HOME = {"name": "home", "type": "efs", "mount": "/home"}
SEEDED = Path(__file__).resolve().parents[1] / "policies" / "seeded"
# The EFS user guide's NFS options (mount-helper-setting.html), and _netdev for /etc/fstab.
EFS_OPTIONS = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"


@pytest.fixture
def home_spec(base_spec):
    base_spec["storage"].append(dict(HOME))
    return base_spec


@pytest.fixture
def plan(plan_spec, home_spec):
    return plan_spec(home_spec)


def published(plan) -> dict[str, str]:
    return s3_objects(plan)


# ---------------------------------------------------------------- the resources


def test_filesystem_is_encrypted_elastic_backed_up_protected_and_retained(plan):
    fs = plan.named("demo-home-fs", EFS)
    assert fs.inputs["encrypted"] is True
    assert fs.inputs["performanceMode"] == "generalPurpose" and fs.inputs["throughputMode"] == "elastic"
    assert fs.inputs["creationToken"] == "demo-home"
    assert fs.inputs["lifecyclePolicies"] == [{"transitionToIa": "AFTER_30_DAYS"},
                                              {"transitionToPrimaryStorageClass": "AFTER_1_ACCESS"}]
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["tags"]["aicluster-role"] == "storage" and fs.inputs["tags"]["Name"] == "demo-home"
    assert stateful_kind(fs.type, fs.inputs) == "filesystem"
    (backup,) = plan.of_type(BACKUP)
    assert backup.inputs["fileSystemId"] == fs.id and backup.inputs["backupPolicy"] == {"status": "ENABLED"}
    # Mount targets and the backup policy hold no data: never protected, so they can be changed.
    assert not backup.protect and not any(t.protect for t in plan.of_type(TARGET))


def test_mount_target_is_in_the_private_subnet_behind_the_home_group(plan):
    fs = plan.named("demo-home-fs", EFS)
    (target,) = plan.of_type(TARGET)
    group = plan.named("demo-home-sg", SG)
    assert target.inputs["fileSystemId"] == fs.id
    assert target.inputs["subnetId"] == plan.named("demo-network-private", "aws:ec2/subnet:Subnet").id
    assert target.inputs["securityGroups"] == [group.id]
    assert "ipAddress" not in target.inputs    # the subnet picks a private address


def test_only_nfs_from_the_cluster_groups_reaches_it(plan):
    group = plan.named("demo-home-sg", SG)
    nodes = plan.named("demo-network-nodes", SG)
    assert not group.inputs.get("ingress") and not group.inputs.get("egress")
    rules = [r for r in plan.of_type(RULE) if r.inputs["securityGroupId"] == group.id]
    assert [(r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
            for r in rules] == [("tcp", 2049, 2049, nodes.id)]
    assert not any(k in r.inputs for r in rules for k in ("cidrIpv4", "cidrIpv6", "prefixListId"))
    # The head node joins the nodes' group: it mounts /home through the same rule.
    head = next(r for r in plan.of_type("aws:ec2/instance:Instance") if r.name.endswith("-head"))
    assert nodes.id in head.inputs["vpcSecurityGroupIds"]


def test_protect_false_opts_out(plan_spec, home_spec):
    home_spec["storage"][1]["protect"] = False
    fs = plan_spec(home_spec).named("demo-home-fs", EFS)
    assert not fs.protect and not fs.retain_on_delete


def test_home_inputs_do_not_depend_on_pools_or_other_storage(plan_spec, home_spec):
    """Scaling or adding pools, and adding a filesystem, leave the EFS filesystem, its mount target
    and its security group as they were."""
    def state(spec):
        p = plan_spec(spec)
        return [(r.urn, r.inputs, r.protect, r.retain_on_delete)
                for r in (p.named("demo-home-fs", EFS), p.named("demo-home-mt-0", TARGET), p.named("demo-home-sg", SG))]

    before = state(home_spec)
    bigger = copy.deepcopy(home_spec)
    bigger["pools"][0]["max_nodes"] = 32
    bigger["pools"].append({"name": "more", "instance_type": "p4d.24xlarge", "max_nodes": 2})
    bigger["storage"].append({"name": "data", "type": "lustre", "mount": "/data", "capacity_gib": 1200})
    assert state(bigger) == before


# ---------------------------------------------------------------- the mount on every node


def test_every_node_mounts_it_with_the_efs_options(plan):
    fs = plan.named("demo-home-fs", EFS)
    line = f"mount_one '{fs.outputs['dnsName']}:/' '/home' 'nfs4' '{EFS_OPTIONS}'"
    assert re.fullmatch(r"fs-[0-9a-f]{17}\.efs\.us-east-1\.amazonaws\.com", fs.outputs["dnsName"])
    scripts = {key: text for key, text in published(plan).items() if "aicluster-mount-storage" in key}
    assert len(scripts) >= 2, sorted(scripts)      # the head's and the compute nodes' copies
    for key, text in scripts.items():
        assert line in text, key
        assert "install_nfs_client" in text.split("mount_one()")[1], key   # nfs-common before the mount


def test_catalog_holds_the_mount_options_with_a_source():
    facts = load_efs()
    assert facts.mount_options == EFS_OPTIONS and facts.nfs_port == 2049
    assert "mount-helper-setting" in facts.source and "checked on" in facts.source


def test_rendered_mount_script_writes_the_fstab_line_and_mounts(tmp_path):
    """The real script, with stubs for mount and the NFS client: /etc/fstab gets the EFS line once
    (it runs at every boot) and /home is mounted."""
    mount = Mount("fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "/", "/home", "nfs4", EFS_OPTIONS, "nfs")
    script = tmp_path / "mount-storage"
    script.write_text(render("scripts/mount-storage.sh.j2", mounts=[mount]))
    stubs, calls, tree = tmp_path / "bin", tmp_path / "calls", tmp_path / "root"
    stubs.mkdir()
    for name, body in {"mountpoint": "exit 1", "mount.nfs": "exit 0", "mount": f'echo "mount $*" >> {calls}'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(tree)}
    for _ in range(2):
        run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    assert (tree / "etc" / "fstab").read_text().splitlines() == [
        f"fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/ /home nfs4 {EFS_OPTIONS} 0 0"]
    assert calls.read_text().splitlines() == ["mount /home"] * 2


# ---------------------------------------------------------------- spec, plan, balance


def _problems(spec: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        design_cluster(parse_spec(spec))
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize("change, expected", [
    (lambda s: s["storage"][1].update(capacity_gib=1024),
     "storage[1].capacity_gib: 1024 is not valid; leave it out for type efs"),
    (lambda s: s["storage"][1].update(throughput_mbps_per_tib=250),
     "storage[1].throughput_mbps_per_tib: 250 is not valid; leave it out for type efs"),
    (lambda s: s["storage"][1].update(import_path="s3://bucket/homes"),
     "storage[1].import_path: 's3://bucket/homes' is not valid; leave it out for type efs"),
    (lambda s: s.update(scheduler="kubernetes"),
     "storage[1].type: 'efs' is not valid; lustre (efs is the shared /home of a Slurm cluster"),
    (lambda s: s["storage"][0].pop("capacity_gib"),
     "storage[0].capacity_gib: None is not valid; a size in GiB for type lustre"),
    (lambda s: s["storage"][1].update(type="filestore", capacity_gib=1024),
     "(did you mean efs?)"),
    (lambda s: s["storage"][1].update(mount="/etc"), "storage[1].mount: '/etc' is not valid"),
])
def test_bad_efs_specs_name_the_path_value_and_what_is_allowed(home_spec, change, expected):
    change(home_spec)
    problems = _problems(home_spec)
    assert any(expected in p for p in problems), problems


def test_efs_is_aws_only():
    gcp = {"name": "gc", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
           "pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": 2}], "storage": [dict(HOME)]}
    problems = _problems(gcp)
    assert any(p.startswith("storage[0].type: 'efs' is not valid; lustre or filestore") and "filestore?" in p
               for p in problems), problems


def test_plan_shows_home_and_balance_ignores_it(home_spec):
    without = copy.deepcopy(home_spec)
    without["storage"].pop()
    design = design_cluster(parse_spec(home_spec))
    (home,) = [s for s in design.storage if s.kind == "efs"]
    assert (home.capacity_gib, home.throughput_mbps_per_tib, home.protect) == (0, 0, True)
    assert _storage_line(home) == ("  home: Amazon EFS (NFS 4.1), elastic, encrypted, AWS Backup on, mounted at "
                                   "/home; protected + retained; not training-data throughput")
    # An NFS home shared by every node is not training-data throughput: the balance is the same.
    assert from_design(design) == from_design(design_cluster(parse_spec(without)))


def test_example_stack_plans_home(capsys):
    assert cli.main(["plan", "--stack", "aws-p5-slurm"]) == 0
    out = capsys.readouterr().out
    assert "home: Amazon EFS (NFS 4.1)" in out and "aws:efs/fileSystem:FileSystem  p5-train-home-fs" in out


# ---------------------------------------------------------------- the policy pack


@pytest.mark.parametrize("case, rule, text", [
    ("unencrypted_efs.py", "AIC-SEC-003", "aws:efs/fileSystem 'handmade-home' has unencrypted storage: encrypted (False)"),
    ("unprotected_efs.py", "AIC-STO-005", "fileSystem 'handmade-home' is stateful storage without the resource "
                                          "option(s) protect and retainOnDelete"),
])
def test_seeded_efs_cases_fail_their_rule(capsys, case, rule, text):
    code = cli.main(["check", str(SEEDED / case)])
    out = capsys.readouterr().out
    assert code == 1, out
    (line,) = [line for line in out.splitlines() if re.match(rf"\s+\S+\s+{rule} ", line)]
    assert line.split()[0] == "FAIL"
    failing = [line.split()[1] for line in out.splitlines() if line.strip().startswith("FAIL")]
    assert failing == [rule], out          # the other rule passes: each case seeds one fault
    assert text in out


def test_shipped_home_passes_the_pack(capsys):
    assert cli.main(["check", "--stack", "aws-p5-slurm"]) == 0, capsys.readouterr().out


def test_first_mount_copies_the_local_homes_in_and_never_overwrites(tmp_path):
    """Mounting the shared /home over the image's would hide the default user's SSH keys: the
    script first copies each local home the filesystem lacks into it (a staging mount), and leaves
    a home the filesystem already has as it is."""
    mount = Mount("fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "/", "/home", "nfs4", EFS_OPTIONS, "nfs")
    script = tmp_path / "mount-storage"
    script.write_text(render("scripts/mount-storage.sh.j2", mounts=[mount]))
    stubs, calls, tree, shared = tmp_path / "bin", tmp_path / "calls", tmp_path / "root", tmp_path / "efs"
    for d in (stubs, tree / "home" / "ubuntu" / ".ssh", tree / "home" / "alice", shared / "alice"):
        d.mkdir(parents=True)
    (tree / "home" / "ubuntu" / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA image-key\n")
    (tree / "home" / "alice" / "notes").write_text("local copy\n")
    (shared / "alice" / "notes").write_text("shared copy\n")
    # `mount -t ... SOURCE DIR` stands the shared tree in for DIR; `umount DIR` puts an empty dir back.
    stub_bodies = {
        "mountpoint": "exit 1", "mount.nfs": "exit 0",
        "mount": f'echo "mount $*" >> {calls}\n'
                 f'if [ "$1" = -t ]; then for last; do :; done; rmdir "$last"; ln -s {shared} "$last"; fi',
        "umount": f'echo "umount" >> {calls}; rm "$1"; mkdir "$1"',
    }
    for name, body in stub_bodies.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    run = subprocess.run(["bash", str(script)], env={"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(tree)},
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (shared / "ubuntu" / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 AAAA image-key\n"
    assert (shared / "alice" / "notes").read_text() == "shared copy\n"
    staged, *rest = calls.read_text().splitlines()
    assert staged.startswith("mount -t nfs4 -o nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,"
                             "noresvport fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/ ")   # no _netdev
    assert rest == ["umount", "mount /home"]
    assert "copied ubuntu into the shared /home" in run.stderr and "copied alice" not in run.stderr


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "aws-p4d-small"])
def test_the_safety_suite_judges_the_example_homes(stack):
    """tests/safety plans every routine edit on every stack and compares its stateful resources: the
    example stacks' EFS homes are among them, protected and retained."""
    from aicluster.design.stateful import stateful_resources
    from tests.support.stack_plans import stack_plan

    (home,) = [r for r in stateful_resources(stack_plan(stack).resources) if r.type == EFS]
    assert home.name.endswith("-home-fs") and home.protect and home.retain_on_delete


def test_login_nodes_mount_home_from_the_published_script(plan):
    """Login nodes fetch the mount script the head publishes (AICLUSTER_MOUNT_KEY): that script
    mounts the EFS home, and they join the nodes' group the NFS rule admits."""
    import base64

    fs = plan.named("demo-home-fs", EFS)
    logins = [r for r in plan.of_type("aws:ec2/instance:Instance") if "-login-" in r.name]
    if not logins:
        pytest.skip("this tree builds no login nodes")
    nodes = plan.named("demo-network-nodes", SG)
    for login in logins:
        user_data = reveal(login.inputs["userData"])
        text = user_data if user_data.startswith("#cloud-config") else base64.b64decode(user_data).decode()
        (key,) = re.findall(r"AICLUSTER_MOUNT_KEY=(\S+)", text)
        assert f"mount_one '{fs.outputs['dnsName']}:/' '/home' 'nfs4'" in published(plan)[key]
        assert nodes.id in login.inputs["vpcSecurityGroupIds"]


def test_the_pack_sees_efs_as_nfs_not_a_parallel_filesystem():
    """AIC-STO-001 over a hand-written stack: GPU nodes with only an EFS home fail, naming it."""
    import pulumi_aws as aws

    from tests.support import handwritten as hw

    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group()
        for i in range(2):
            hw.instance(f"node{i}", subnet, sg, placement=pg, tags={**hw.TAGS, "aicluster-pool": "gpu"})
        aws.efs.FileSystem("home", encrypted=True, throughput_mode="elastic", tags=hw.TAGS)
    verdict = hw.check("AIC-STO-001", program)
    assert verdict.status == "fail" and "only home (Amazon EFS elastic (NFS))" in hw.messages(verdict)
