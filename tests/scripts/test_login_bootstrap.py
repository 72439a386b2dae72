"""aicluster-login-bootstrap, run for real in a scratch tree: the munge key, sackd in configless
mode (never slurmd), and the filesystems' mount script fetched from the configuration bucket
(moto's S3 server stands in for S3). systemctl, munge/unmunge, sinfo, sackd and logger are
recording stubs; install, sed, timeout and python3 (boto3) are real."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from aicluster.login_files import MOUNT_SCRIPT_KEY
from tests.support import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "templates" / "scripts" / "aicluster-login-bootstrap"
BUCKET, REGION, CONTROLLER = "demo-config", "us-east-1", "10.0.0.5:6817"
MOUNT = '#!/bin/bash\necho mounted >> "$AICLUSTER_ROOT/mounted"\n'


@pytest.fixture(scope="module")
def s3():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    endpoint = f"http://127.0.0.1:{server._server.server_port}"
    client = boto3.client("s3", region_name=REGION, endpoint_url=endpoint,
                          aws_access_key_id="test", aws_secret_access_key="test")
    client.create_bucket(Bucket=BUCKET)
    yield endpoint, client
    server.stop()


def node(tmp: Path, endpoint: str) -> tuple[dict, Path]:
    root, stubs, programs = tmp / "root", tmp / "stubs", tmp / "opt"
    for d in (root / "etc" / "aicluster", stubs, programs):
        d.mkdir(parents=True)
    (root / "etc" / "aicluster" / "login.env").write_text(
        f"AICLUSTER_CLOUD=aws\nAICLUSTER_REGION={REGION}\nAICLUSTER_CONTROLLER={CONTROLLER}\n"
        f"AICLUSTER_MUNGE_SECRET=arn:aws:secretsmanager:{REGION}:123456789012:secret:munge\n"
        f"AICLUSTER_BUCKET={BUCKET}\nAICLUSTER_MOUNT_KEY={MOUNT_SCRIPT_KEY}\n")
    stub = {name: f'#!/bin/bash\necho "{name} $*" >> "{stubs}/calls"\n'
            for name in ("systemctl", "logger", "sackd", "munge", "aicluster-secret", "groupadd", "useradd")}
    # No slurm user or group on this node (only the client packages ran): getent finds nothing.
    stub["getent"] = f'#!/bin/bash\necho "getent $*" >> "{stubs}/calls"\nexit 2\n'
    stub["unmunge"] = f'#!/bin/bash\ncat >/dev/null\necho unmunge >> "{stubs}/calls"\n'
    stub["sinfo"] = f'#!/bin/bash\necho "sinfo $*" >> "{stubs}/calls"\nexit "$(cat {stubs}/sinfo.rc 2>/dev/null || echo 0)"\n'
    for name, text in stub.items():
        path = (programs if name == "aicluster-secret" else stubs) / name
        path.write_text(text)
        path.chmod(0o755)
    (stubs / "python3").symlink_to(sys.executable)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "AICLUSTER_BIN": str(programs),
           "AICLUSTER_POLL_S": "0", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "HOME": str(tmp)}
    return env, stubs


def run(env, *args):
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_joins_with_sackd_never_slurmd_and_mounts_the_published_filesystems(s3, tmp_path):
    endpoint, client = s3
    client.put_object(Bucket=BUCKET, Key=MOUNT_SCRIPT_KEY, Body=MOUNT.encode())
    env, stubs = node(tmp_path, endpoint)
    result = run(env)
    assert result.returncode == 0, result.stderr
    calls = (stubs / "calls").read_text().splitlines()
    assert calls[0].startswith("aicluster-secret arn:aws:secretsmanager:") and "--owner munge:munge" in calls[0]
    assert "systemctl enable sackd" in calls and "systemctl restart sackd" in calls
    assert "systemctl enable --now aicluster-login-mounts.timer" in calls
    assert not [c for c in calls if "slurmd" in c]
    # sackd's user, with the ids Debian's slurmd and slurmctld give it on the other nodes.
    assert "groupadd --system --gid 64030 slurm" in calls
    assert [c for c in calls if c.startswith("useradd --system --uid 64030 --gid slurm ")]
    unit = (Path(env["AICLUSTER_ROOT"]) / "etc/systemd/system/sackd.service").read_text()
    assert f"ExecStart=/usr/sbin/sackd --systemd --conf-server {CONTROLLER}\n" in unit
    assert "User=slurm" in unit and "RuntimeDirectory=slurm" in unit
    root = Path(env["AICLUSTER_ROOT"])
    assert (root / "mounted").read_text() == "mounted\n"
    assert os.access(root / "usr/local/sbin/aicluster-mount-storage", os.X_OK)


def test_slurm_joins_before_the_filesystems_are_published_and_the_timer_mounts_them_later(s3, tmp_path):
    endpoint, client = s3
    client.delete_object(Bucket=BUCKET, Key=MOUNT_SCRIPT_KEY)
    env, _ = node(tmp_path, endpoint)
    result = run(env)
    assert result.returncode == 0, result.stderr
    assert "filesystems not mounted yet" in result.stderr
    assert run(env, "--mounts").returncode == 1          # the timer's run fails until it is published
    client.put_object(Bucket=BUCKET, Key=MOUNT_SCRIPT_KEY, Body=MOUNT.encode())
    assert run(env, "--mounts").returncode == 0
    assert (Path(env["AICLUSTER_ROOT"]) / "mounted").read_text() == "mounted\n"


def test_an_unreachable_controller_fails_the_set_up(s3, tmp_path):
    env, stubs = node(tmp_path, s3[0])
    (stubs / "sinfo.rc").write_text("1")
    result = run(env)
    assert result.returncode == 1 and f"is slurmctld up at {CONTROLLER}" in result.stderr


def test_shellcheck():
    result = subprocess.run(["shellcheck", "--severity=style", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
