"""aicluster-sync, run as the head node's timer runs it, against moto's S3 with the files the
plan publishes: installs them, links the power programs, reconfigures only on change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import boto3
import pytest

from tests.support import ROOT, stack_spec

SCRIPT = ROOT / "templates" / "scripts" / "aicluster-sync.py"
BUCKET = "p5-train-config"


@pytest.fixture
def head(moto_endpoint, tmp_path):
    from aicluster.aws.slurm import CONFIG_PREFIX, published_files
    from aicluster.design import design_cluster
    from aicluster.spec import parse_spec

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint,
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=BUCKET)
    design = design_cluster(parse_spec(stack_spec("aws-p5-slurm")))
    files = published_files(design, controller_addr="10.0.0.10", subnet_id="subnet-0123456789abcdef0",
                            launch_templates={"gpu": "lt-0123456789abcdef0"}, placement_groups={"gpu": "pg"},
                            accounting_secret=None, hosted_zone_id="Z0123456789ABCDEFGHIJ")
    for key, content in files.items():
        s3.put_object(Bucket=BUCKET, Key=CONFIG_PREFIX + key, Body=content.encode())
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(
        json.dumps({"bucket": BUCKET, "prefix": CONFIG_PREFIX, "region": "us-east-1"}))
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "systemctl"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n'
                                    # `scontrol -o show node` answers like Slurm 22.05 for a powered-down node
                                    f'[ "$1 $2 $3" = "-o show node" ] && echo "NodeName=$4 Arch=x86_64 '
                                    f'State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=2"\nexit 0\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "AICLUSTER_ROOT": str(root), "AICLUSTER_SCONTROL": str(bin_dir / "scontrol"),
           "AICLUSTER_SYSTEMCTL": str(bin_dir / "systemctl"), "AWS_ENDPOINT_URL": moto_endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

    def sync(*args):
        run = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return calls.read_text().splitlines() if calls.exists() else []

    return s3, root, files, sync, calls


def test_bootstrap_installs_every_published_file(head):
    s3, root, files, sync, calls = head
    sync("--bootstrap")
    conf = root / "etc" / "slurm" / "slurm.conf"
    assert conf.read_text() == files["slurm/slurm.conf"]
    assert oct(conf.stat().st_mode & 0o777) == "0o644"
    power = root / "opt" / "aicluster" / "bin" / "aicluster-power.py"
    assert power.read_text() == files["bin/aicluster-power.py"] and os.access(power, os.X_OK)
    for link in ("aicluster-resume", "aicluster-suspend", "aicluster-resume-fail"):
        assert os.readlink(root / "opt" / "aicluster" / "bin" / link) == "aicluster-power.py"
    assert json.loads((root / "etc" / "aicluster" / "cluster.json").read_text())["cluster"] == "p5-train"
    # Bootstrap never reconfigures: slurmctld is not running yet.
    assert not any(c.startswith("scontrol") for c in (calls.read_text().splitlines() if calls.exists() else []))


def test_changes_reconfigure_once_and_only_on_change(head):
    s3, root, files, sync, calls = head
    sync("--bootstrap")
    assert not any(c.startswith("scontrol") for c in sync())          # nothing changed
    changed = files["slurm/slurm.conf"].replace("SuspendTime=600", "SuspendTime=2700")
    assert changed != files["slurm/slurm.conf"]
    s3.put_object(Bucket=BUCKET, Key="head/slurm/slurm.conf", Body=changed.encode())
    lines = sync()  # every call so far, across the runs of this test
    assert lines.count("scontrol reconfigure") == 1
    # Slurm 22.05 dies on a reconfigure that changes nodes: restart first, then push to slurmd.
    assert lines.index("systemctl restart slurmctld") < lines.index("scontrol reconfigure")
    assert (root / "etc" / "slurm" / "slurm.conf").read_text() == changed


def test_static_nodes_are_powered_up(head, tmp_path):
    s3, root, files, sync, calls = head
    cluster = json.loads(files["aicluster/cluster.json"])
    cluster["static_nodes"] = ["gpu-[1-2]"]
    s3.put_object(Bucket=BUCKET, Key="head/aicluster/cluster.json", Body=json.dumps(cluster).encode())
    lines = sync()
    assert "scontrol -o show node gpu-[1-2]" in lines
    assert "scontrol update nodename=gpu-[1-2] state=power_up" in lines


def test_head_up_before_the_configuration_waits_then_starts_slurmctld(head, tmp_path):
    """The head node is created while the filesystems still are, so at boot nothing may be
    published yet: bootstrap succeeds with nothing to do. Once `pulumi up` publishes, the timer
    installs the files, runs the mount script, and starts slurmctld although it was not running."""
    s3, root, files, sync, calls = head
    published = {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
                 for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    for key in published:
        s3.delete_object(Bucket=BUCKET, Key=key)
    assert sync("--bootstrap") == []
    assert not (root / "etc" / "slurm" / "slurm.conf").exists()
    assert not [c for c in sync() if "restart" in c or c.startswith("scontrol")]   # the timer: still nothing
    (tmp_path / "bin" / "systemctl").write_text(         # slurmctld could not start without a config
        f'#!/bin/sh\necho "systemctl $*" >> {calls}\n[ "$1" = "is-active" ] && exit 3\nexit 0\n')
    for key, body in published.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    lines = sync()
    assert (root / "etc" / "slurm" / "slurm.conf").read_text() == files["slurm/slurm.conf"]
    assert (root / "usr" / "local" / "sbin" / "aicluster-mount-storage").read_text() == files["bin/aicluster-mount-storage"]
    assert lines.index("systemctl restart slurmctld") < lines.index("scontrol reconfigure")
