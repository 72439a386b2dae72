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
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.support import free_port

SCRIPTS = Path(__file__).resolve().parents[2] / "templates" / "scripts"
AWS_SCRIPT = SCRIPTS / "aicluster-node-bootstrap"
GCP_SCRIPT = SCRIPTS / "aicluster-gcp-node-bootstrap"
NODE_TAG = "aicluster:slurm-node"
REGION = "us-east-1"

STUBS = {
    # Records its arguments; answers `mountpoint -q X` from the file `mounted`.
    "mountpoint": '#!/bin/bash\necho "mountpoint $*" >> "${0%/*}/calls"\n'
                  'grep -qxF -- "${@: -1}" "${0%/*}/mounted" 2>/dev/null\n',
    "unmunge": '#!/bin/bash\ncat >/dev/null\necho "unmunge" >> "${0%/*}/calls"\n'
               'exit "$(cat "${0%/*}/unmunge.rc" 2>/dev/null || echo 0)"\n',
    "munge": '#!/bin/bash\necho "MUNGE:credential"\n',
    "slurmd": '#!/bin/bash\nexit 0\n',
}
RECORDERS = ("systemctl", "hostnamectl", "install", "logger", "apt-get")


class Metadata:
    """IMDSv2 (AWS) and the GCE metadata server in one loopback server: GET answers from `values`,
    PUT /latest/api/token gives a token, PUT .../guest-attributes/<ns>/<key> is stored."""

    def __init__(self):
        self.values: dict[str, str] = {}
        self.guest_attributes: dict[str, str] = {}
        meta = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, text: str = "") -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith("/latest/") and self.headers.get("X-aws-ec2-metadata-token") != "tok":
                    return self._reply(401)
                if self.path.startswith("/computeMetadata/") and self.headers.get("Metadata-Flavor") != "Google":
                    return self._reply(403)
                value = meta.values.get(self.path)
                self._reply(200, value) if value is not None else self._reply(404, "not found")

            def do_PUT(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if self.path == "/latest/api/token":
                    return self._reply(200, "tok")
                prefix = "/computeMetadata/v1/instance/guest-attributes/"
                if self.path.startswith(prefix) and self.headers.get("Metadata-Flavor") == "Google":
                    meta.guest_attributes[self.path[len(prefix):]] = body
                    return self._reply(200)
                self._reply(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Node:
    """A scratch tree for one boot: root/ (etc, sys), bin/ (stubs), and the node's programs."""

    def __init__(self, tmp: Path, meta: Metadata):
        self.tmp, self.meta = tmp, meta
        self.root = tmp / "root"
        (self.root / "etc" / "aicluster").mkdir(parents=True)
        (self.root / "etc" / "default").mkdir(parents=True)
        (self.root / "etc" / "munge").mkdir(parents=True)
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for name, text in STUBS.items():
            self._stub(name, text)
        for name in RECORDERS:
            self._stub(name, f'#!/bin/bash\necho "{name} $*" >> "${{0%/*}}/calls"\n')
        (self.bin / "python3").symlink_to(sys.executable)
        self.programs = tmp / "opt"
        self.programs.mkdir()
        secret = self.programs / "aicluster-secret"
        secret.write_text(f'#!/bin/bash\necho "aicluster-secret $*" >> {self.bin}/calls\n'
                          f'exit "$(cat {self.bin}/secret.rc 2>/dev/null || echo 0)"\n')
        secret.chmod(0o755)
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "AICLUSTER_ROOT": str(self.root),
                    "AICLUSTER_BIN": str(self.programs), "AICLUSTER_POLL_S": "0"}

    def _stub(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def node_env(self, **values: str) -> None:
        (self.root / "etc" / "aicluster" / "node.env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def fstab(self, *entries: tuple[str, str, str], mounted: tuple[str, ...] = ()) -> None:
        (self.root / "etc" / "fstab").write_text(
            "# /etc/fstab\nLABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
            + "".join(f"{src} {dst} {fs} defaults 0 0\n" for src, dst, fs in entries))
        (self.bin / "mounted").write_text("".join(f"{m}\n" for m in mounted))

    def rdma_devices(self, count: int) -> None:
        ib = self.root / "sys" / "class" / "infiniband"
        ib.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (ib / f"rdmap{79 + i}s0").mkdir()

    def script(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def fail(self, what: str, rc: int = 1) -> None:
        (self.bin / f"{what}.rc").write_text(str(rc))

    def run(self, script: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(script), *args], env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=120)

    def calls(self) -> list[str]:
        log = self.bin / "calls"
        return log.read_text().splitlines() if log.exists() else []

    def slurmd_started(self) -> bool:
        return "systemctl restart slurmd" in self.calls()


@pytest.fixture
def meta():
    server = Metadata()
    yield server
    server.stop()


@pytest.fixture
def node(tmp_path, meta) -> Node:
    return Node(tmp_path, meta)


# --- AWS -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ec2_endpoint():
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws(node, meta, ec2_endpoint):
    """An instance in moto's EC2, this node's IMDS answering for it, and the node's env file."""
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ENDPOINT_URL": ec2_endpoint}
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=ec2_endpoint, aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    meta.values.update({"/latest/meta-data/instance-id": instance,
                        "/latest/meta-data/placement/region": REGION,
                        f"/latest/meta-data/tags/instance/{NODE_TAG}": "gpu-3"})
    node.env.update(creds | {"AICLUSTER_IMDS": f"{meta.base}/latest"})
    node.node_env(AICLUSTER_CLUSTER="demo", AICLUSTER_GPUS="8", AICLUSTER_FABRIC_DEVICES="4",
                  AICLUSTER_CONTROLLER="head", AICLUSTER_MUNGE_SECRET="arn:aws:secretsmanager:x",
                  AICLUSTER_NODE_TAG=NODE_TAG)
    node.fstab(("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc", "/fsx", "lustre"), mounted=("/fsx",))
    node.rdma_devices(4)

    def error_tag() -> str | None:
        tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"]
        return {t["Key"]: t["Value"] for t in tags}.get("aicluster-bootstrap-error")

    node.error_tag = error_tag
    return node


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


@pytest.fixture
def gcp(node, meta):
    meta.values["/computeMetadata/v1/instance/name"] = "demo-gpu-2"
    node.env["AICLUSTER_GCP_METADATA"] = f"{meta.base}/computeMetadata/v1"
    node.node_env(AICLUSTER_CLUSTER="demo", AICLUSTER_GPUS="8", AICLUSTER_FABRIC_KIND="rdma",
                  AICLUSTER_FABRIC_DEVICES="8", AICLUSTER_CONTROLLER="demo-head",
                  AICLUSTER_MUNGE_SECRET="projects/p/secrets/munge", AICLUSTER_INSTANCE_PREFIX="demo-")
    node.fstab(("10.0.0.5@tcp:/lfs", "/lustre", "lustre"), ("10.0.0.9:/home", "/home", "nfs"),
               mounted=("/lustre", "/home"))
    node.rdma_devices(8)
    return node


def bootstrap_error(meta: Metadata) -> str | None:
    return meta.guest_attributes.get("aicluster/bootstrap-error")


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
