"""The node join programs' harness (aicluster-node-bootstrap on AWS, aicluster-gcp-node-bootstrap on
GCP) run for real in a scratch tree: recording stubs for the system programs, moto's EC2 server
and a small metadata server on loopback. Shared by tests/scripts/test_node_bootstrap.py and
tests/slurm/test_pinned_slurm.py."""
from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from aicluster.catalog.slurm_release import slurm_release
from tests.support import free_port

SCRIPTS = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin"
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
    # `slurmd -V` answers the cluster's pinned Slurm (catalog/slurm_release.yaml), or slurmd.version.
    "slurmd": '#!/bin/bash\n[[ ${1:-} != -V ]] || cat "${0%/*}/slurmd.version" 2>/dev/null || '
              f'echo "slurm {slurm_release().version}"\n',
}
RECORDERS = ("systemctl", "hostnamectl", "install", "logger", "apt-get", "apt-mark")


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
        r = slurm_release()
        values = {"AICLUSTER_SLURM_VERSION": r.version, "AICLUSTER_SLURM_SHA256": r.sha256,
                  "AICLUSTER_SLURM_SIZE": str(r.size), "AICLUSTER_SLURM_URLS": " ".join(r.urls), **values}
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


def setup_aws_node(node: Node, meta: Metadata, ec2_endpoint: str) -> tuple:
    """An instance in moto's EC2 at `ec2_endpoint`, `meta` answering IMDS for it, and the node's
    env file, fstab and RDMA devices (the `aws` fixture, and bench/boot_to_slurmd.py).
    Returns (ec2 client, instance id)."""
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
    return ec2, instance


@pytest.fixture
def aws(node, meta, ec2_endpoint):
    """An instance in moto's EC2, this node's IMDS answering for it, and the node's env file."""
    ec2, instance = setup_aws_node(node, meta, ec2_endpoint)

    def error_tag() -> str | None:
        tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"]
        return {t["Key"]: t["Value"] for t in tags}.get("aicluster-bootstrap-error")

    node.error_tag = error_tag
    return node


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
