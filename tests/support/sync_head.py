"""A head node for aicluster-sync tests (tests/scripts): the files the AWS plan publishes, in
moto's S3; a root directory standing for the head's /; scontrol and systemctl stand-ins that
record their calls; a stand-in slurmctld for the configuration test (tests/support/fake_slurmctld.py).
The program runs as the timer runs it, as a subprocess."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import boto3

from aicluster.render.slurm_config import SLURM_CONFIG_FILES
from tests.support import fake_slurmctld, stack_spec
from tests.support.bucket_objects import as_bytes
from tests.support.node_programs import module_command
from tests.support.slurmctld import Controller, tool

SYNC = module_command("sync")          # aicluster-sync from the built archive, as a node runs it
BUCKET = "p5-train-config"
STATE = "var/lib/aicluster/sync"
# `scontrol -o show node` answers like Slurm 22.05 for a powered-down node; every call is recorded.
RECORDER = ('#!/bin/sh\necho "{name} $*" >> {calls}\n'
            '[ "$1 $2 $3" = "-o show node" ] && echo "NodeName=$4 Arch=x86_64 '
            'State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=2"\nexit 0\n')


def s3_client(endpoint: str):
    return boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@dataclass
class Head:
    s3: object
    root: Path
    tmp: Path
    files: dict          # key -> content, as published (the test may change the bucket after)
    prefix: str
    env: dict

    @property
    def calls(self) -> Path:
        return self.tmp / "calls"

    @property
    def bin(self) -> Path:
        return self.tmp / "bin"

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*SYNC, *args], env=self.env, capture_output=True,
                              text=True, timeout=300)

    def sync(self, *args: str) -> list[str]:
        """One pass that must succeed; every recorded command call so far."""
        done = self.run(*args)
        assert done.returncode == 0, done.stderr
        return self.call_lines()

    def call_lines(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def put(self, key: str, body: str | bytes) -> None:
        """Publish a new version of one file as aicluster does: the object, and its sha256 in the
        manifest (when the manifest lists the key)."""
        data = body.encode() if isinstance(body, str) else body
        self.put_raw(key, data)
        if key == "manifest.json":
            return
        manifest = self.manifest()
        for entry in manifest["files"]:
            if entry.get("key") == key and "sha256" in entry:
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                self.put_raw("manifest.json", json.dumps(manifest, indent=2) + "\n")

    def put_raw(self, key: str, body: str | bytes) -> None:
        """Only the object: a manifest that no longer matches it (an object replaced mid-read)."""
        self.s3.put_object(Bucket=BUCKET, Key=self.prefix + key, Body=body.encode() if isinstance(body, str) else body)

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=BUCKET, Key=self.prefix + key)

    def manifest(self) -> dict:
        return json.loads(self.s3.get_object(Bucket=BUCKET, Key=self.prefix + "manifest.json")["Body"].read())

    def stub(self, name: str, body: str) -> None:
        """Replace a command stand-in's script body (after its recording line)."""
        (self.bin / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {self.calls}\n{body}\n')

    def installed(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def state(self, name: str) -> Path:
        return self.root / STATE / name


METRICS_WRITE_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd/api/v1/remote_write"


def aws_head(moto_endpoint: str, tmp_path: Path) -> Head:
    from aicluster.aws.slurm import CONFIG_PREFIX, published_files
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    s3 = s3_client(moto_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    # Accounting off: its set-up reads the cloud's secret store and runs slurmdbd, which
    # tests/slurm/test_real_slurmdbd.py does for real; here the sync itself is under test.
    spec = stack_spec("aws-p5-slurm")
    spec.setdefault("slurm", {})["accounting"] = False
    design = design_cluster(parse_spec(spec))
    files = published_files(design, controller_addr="10.0.0.10", subnet_id="subnet-0123456789abcdef0",
                            launch_templates={"gpu": "lt-0123456789abcdef0"}, placement_groups={"gpu": "pg"},
                            accounting_secret=None, hosted_zone_id="Z0123456789ABCDEFGHIJ",
                            metrics_write_url=METRICS_WRITE_URL)
    for key, content in files.items():
        s3.put_object(Bucket=BUCKET, Key=CONFIG_PREFIX + key, Body=as_bytes(content))
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(
        json.dumps({"bucket": BUCKET, "prefix": CONFIG_PREFIX, "region": "us-east-1"}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # systemd-run and systemctl also first on PATH: the published programs' run steps (the head's
    # monitoring set-up starts its transient unit) record instead of reaching a system bus.
    for name in ("scontrol", "systemctl", "systemd-run"):
        (bin_dir / name).write_text(RECORDER.format(name=name, calls=tmp_path / "calls"))
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "AICLUSTER_ROOT": str(root), "AICLUSTER_SCONTROL": str(bin_dir / "scontrol"),
           "AICLUSTER_SYSTEMCTL": str(bin_dir / "systemctl"),
           "AICLUSTER_SLURMCTLD": str(fake_slurmctld.install(bin_dir)),
           fake_slurmctld.CALLS: str(tmp_path / "slurmctld-tests"),
           "AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("JOURNAL_STREAM", None)
    return Head(s3, root, tmp_path, files, CONFIG_PREFIX, env)


CONTROLLER_PREFIX = "head/"
RESTARTS = "systemctl restart slurmctld"


class ControllerHead:
    """A head node with a real controller (tests/support/slurmctld.py) whose Slurm directory is
    where the published manifest installs: the bucket it syncs from (moto's S3) and one sync pass.
    The real scontrol and slurmctld (the throwaway) of whatever release is first on PATH; systemctl
    is a recorder (the controller is not a systemd unit here)."""

    def __init__(self, ctl: Controller, root, endpoint: str):
        self.ctl, self.root, self.s3 = ctl, root, s3_client(endpoint)
        self.calls = root / "systemctl.calls"
        systemctl = root / "systemctl"
        systemctl.write_text(f'#!/bin/sh\necho "systemctl $*" >> {self.calls}\nexit 0\n')
        systemctl.chmod(0o755)
        (root / "etc" / "aicluster").mkdir(parents=True)
        (root / "etc" / "aicluster" / "sync.json").write_text(
            json.dumps({"bucket": BUCKET, "prefix": CONTROLLER_PREFIX, "region": "us-east-1"}))
        self.env = {**ctl.env, "AICLUSTER_ROOT": str(root), "AICLUSTER_SLURMCTLD": tool("slurmctld"),
                    "AICLUSTER_SCONTROL": tool("scontrol"), "AICLUSTER_SYSTEMCTL": str(systemctl),
                    "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
        self.env.pop("JOURNAL_STREAM", None)
        self.tmp = root / "tmp"                # where the throwaway's copy goes (tempfile honours TMPDIR)
        self.tmp.mkdir()
        self.env["TMPDIR"] = str(self.tmp)

    def where(self, name: str) -> str:
        """The file's path as the manifest names it (under AICLUSTER_ROOT)."""
        return "/" + str((self.ctl.conf.parent / name).relative_to(self.root))

    def current(self, name: str) -> str:
        return (self.ctl.conf.parent / name).read_text()

    def publish(self, slurm_conf: str) -> None:
        """The controller's own Slurm files, with this slurm.conf."""
        entries = []
        for name in SLURM_CONFIG_FILES:
            body = slurm_conf if name == "slurm.conf" else self.current(name)
            self.s3.put_object(Bucket=BUCKET, Key=f"{CONTROLLER_PREFIX}slurm/{name}", Body=body.encode())
            entries.append({"key": f"slurm/{name}", "path": self.where(name), "mode": "0644", "reconfigure": True})
        self.s3.put_object(Bucket=BUCKET, Key=f"{CONTROLLER_PREFIX}manifest.json", Body=json.dumps({"files": entries}).encode())

    def sync(self) -> subprocess.CompletedProcess:
        return subprocess.run(SYNC, env=self.env, capture_output=True, text=True,
                              timeout=300)

    def restarts(self) -> int:
        return self.calls.read_text().splitlines().count(RESTARTS) if self.calls.exists() else 0
