"""The compute nodes' join programs, fail-fast (issue 13, deliverable 7): aicluster-node-bootstrap
(AWS) and aicluster-gcp-node-bootstrap (GCP), run for real in a scratch tree.

A node whose storage mount, fabric or munge set-up fails never starts slurmd and says why where
the head node's reconcile loop looks: on AWS the EC2 tag aicluster-bootstrap-error on its own
instance (moto's EC2 server stands in for EC2, a small IMDSv2 on loopback for the instance
metadata), on GCP the guest attribute aicluster/bootstrap-error (a small metadata server on
loopback records the PUT). The system programs the scripts drive (systemctl, hostnamectl,
mountpoint, munge/unmunge, install, logger) are recording stubs; curl, sed and timeout are real.

shellcheck is required: without it the lint test fails, it does not skip.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.support import free_port
from tests.support.node_bootstrap import (  # noqa: F401  (fixtures: pytest finds them by name)
    AWS_SCRIPT, GCP_SCRIPT, aws, bootstrap_error, ec2_endpoint, gcp, meta, node)


def test_a_healthy_aws_node_joins(aws):
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert aws.slurmd_started()
    assert (aws.root / "etc" / "default" / "slurmd").read_text() == 'SLURMD_OPTIONS="--conf-server head -N gpu-3"\n'
    assert "hostnamectl set-hostname gpu-3" in aws.calls()
    assert aws.error_tag() is None


def test_a_failed_mount_never_starts_slurmd_and_tags_the_instance(aws):
    mount = aws.script("mount", "#!/bin/bash\necho 'aicluster-mount: mount of /fsx failed (attempt 6), retrying' >&2\n"
                                "echo 'aicluster-mount: giving up on /fsx' >&2\nexit 1\n")
    run = aws.run(AWS_SCRIPT, "--mount", str(mount))
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert aws.error_tag() == "storage: aicluster-mount: giving up on /fsx (mount script exit 1)"
    assert "FAILED: storage: aicluster-mount: giving up on /fsx" in run.stderr


def test_a_filesystem_left_unmounted_never_starts_slurmd(aws):
    aws.fstab(("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc", "/fsx", "lustre"), mounted=())
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert aws.error_tag() == "storage: not mounted: /fsx (fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc)"


def test_a_missing_efa_device_never_starts_slurmd(aws):
    shutil.rmtree(aws.root / "sys" / "class" / "infiniband" / "rdmap80s0")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert aws.error_tag() == "fabric: expected 4 EFA devices, found 3 in /sys/class/infiniband"


def test_munge_that_does_not_answer_never_starts_slurmd(aws):
    aws.fail("unmunge")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert aws.error_tag() == "munge: munged does not answer with the cluster key"


def test_any_other_failure_names_its_step(aws):
    aws.fail("secret")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert aws.error_tag() == "munge: failed (exit 1)"


def test_an_unreachable_ec2_is_logged_and_still_fails(aws):
    aws.fail("unmunge")
    run = aws.run(AWS_SCRIPT, env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
                                   "AWS_MAX_ATTEMPTS": "1"})
    assert run.returncode == 1
    assert not aws.slurmd_started()
    assert "could not tag the instance with the reason" in run.stderr


# --- GCP -----------------------------------------------------------------------------------------
def test_a_healthy_gcp_node_joins(gcp, meta):
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert gcp.slurmd_started()
    assert (gcp.root / "etc" / "default" / "slurmd").read_text() == \
        'SLURMD_OPTIONS="--conf-server demo-head -N gpu-2"\n'
    assert bootstrap_error(meta) is None


def test_a_failed_nic_setup_never_starts_slurmd_and_says_why(gcp, meta):
    fabric = gcp.script("aicluster-gcp-fabric", "#!/bin/bash\necho 'aicluster-gcp-fabric: no MRDMA NICs' >&2\nexit 3\n")
    run = gcp.run(GCP_SCRIPT, "--fabric", str(fabric))
    assert run.returncode == 1
    assert not gcp.slurmd_started()
    assert bootstrap_error(meta) == "fabric: aicluster-gcp-fabric: no MRDMA NICs (aicluster-gcp-fabric exit 3)"


def test_a_missing_rdma_device_never_starts_slurmd(gcp, meta):
    shutil.rmtree(gcp.root / "sys" / "class" / "infiniband" / "rdmap79s0")
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 1
    assert not gcp.slurmd_started()
    assert bootstrap_error(meta) == "fabric: expected 8 rdma devices, found 7"


def test_an_nfs_home_left_unmounted_never_starts_slurmd(gcp, meta):
    """The mount ran as its own runcmd entry (user data today) and failed: the bootstrap sees it."""
    gcp.fstab(("10.0.0.5@tcp:/lfs", "/lustre", "lustre"), ("10.0.0.9:/home", "/home", "nfs"), mounted=("/lustre",))
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 1
    assert not gcp.slurmd_started()
    assert bootstrap_error(meta) == "storage: not mounted: /home (10.0.0.9:/home)"


def test_an_instance_not_named_by_slurm_says_so(gcp, meta):
    meta.values["/computeMetadata/v1/instance/name"] = "someone-elses-vm"
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 1
    assert bootstrap_error(meta) == "node-name: instance someone-elses-vm is not named demo-<node>; " \
                                    "it was not launched by Slurm"


def test_gcp_munge_failure_never_starts_slurmd(gcp, meta):
    gcp.fail("unmunge")
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 1
    assert not gcp.slurmd_started()
    assert bootstrap_error(meta) == "munge: munged does not answer with the cluster key"


# --- lint ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("script", [AWS_SCRIPT, GCP_SCRIPT], ids=lambda p: p.name)
def test_bootstrap_scripts_pass_shellcheck(script):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test: apt-get install shellcheck (.ci/run installs it)"
    assert os.access(script, os.X_OK), f"{script} must be executable"
    run = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.dumps(run.stdout) == '""'


# --- an arm64 node: no enroot pin, no containers, still a Slurm node ---------------------------------

@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_an_arm64_node_without_an_enroot_pin_joins_slurm_without_containers(request, cloud):
    """The real aicluster-containers (the catalog's pins: amd64 only) on an arm64 node: it installs
    nothing, says why, and the boot goes on to slurmd. Before, the boot died at its containers step
    and a GB200/A4X node never joined Slurm."""
    from aicluster.render.node_local_files import CONTAINERS_PROGRAM, containers_program

    node = request.getfixturevalue(cloud)
    program = node.programs / CONTAINERS_PROGRAM
    program.write_text(containers_program())
    program.chmod(0o755)
    dpkg = node.bin / "dpkg"
    dpkg.write_text('#!/bin/bash\necho arm64\n')
    dpkg.chmod(0o755)
    run = node.run(AWS_SCRIPT if cloud == "aws" else GCP_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert node.slurmd_started()
    assert "aicluster-containers: containers unavailable on arm64: enroot" in run.stderr
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("curl ", "apt-get install")) and "enroot" in c]
    # The journal has the line too (the node's logs ship it): what the node lacks is never silent.
    assert [c for c in calls if c.startswith("logger -t aicluster-containers -p daemon.warning -- containers "
                                             "unavailable on arm64")]


# --- monitoring: started after slurmd, in the background, never fatal ------------------------------

@pytest.mark.parametrize("rc", [0, 1])
@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_monitoring_starts_after_slurmd_and_its_failure_keeps_the_node(request, cloud, rc):
    node = request.getfixturevalue(cloud)
    program = node.programs / "aicluster-monitoring"
    program.write_text(f'#!/bin/bash\necho "aicluster-monitoring $*" >> {node.bin}/calls\nexit {rc}\n')
    program.chmod(0o755)
    run = node.run(AWS_SCRIPT if cloud == "aws" else GCP_SCRIPT)
    assert run.returncode == 0, run.stderr
    calls = node.calls()
    started = [i for i, c in enumerate(calls) if c.startswith("aicluster-monitoring ")]
    assert [calls[i] for i in started] == [f"aicluster-monitoring --cloud {cloud} --role compute --background"]
    assert started[0] > calls.index("systemctl restart slurmd")
    assert ("this node is not monitored" in run.stderr) == bool(rc)
    if cloud == "aws":
        assert node.error_tag() is None            # not a bootstrap failure: the node stays in Slurm
