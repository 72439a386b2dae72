"""The programs a node fetches at boot, for real: aicluster-fetch, exactly as the user data carries
it, run as a subprocess against moto's S3 holding exactly the objects the plan publishes; and the
fetched programs themselves, read by shellcheck (they used to be checked inside the user data), and
the fetched entry points of aicluster.node run from the modules fetched beside them.

shellcheck is required: a missing tool fails, it does not skip.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace
import zipfile

import boto3
import pytest
import yaml

from aicluster.render.node_programs import NODE_PROGRAMS, artifact
from tests.support import STACK_NAMES, stack_spec
from tests.support.stack_plans import stack_result
from tests.support.bucket_objects import as_bytes, s3_objects

STACK = "aws-p5-slurm"
REGION = "us-east-1"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
# The programs of aicluster.node each role's archive runs (aws/slurm.py).
PACKAGED_BY_ROLE = {"head": ["aicluster-sync", "aicluster-secret", "aicluster-install-slurm"],
                    "compute": list(NODE_PROGRAMS)}
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
AWS_SLURM_STACKS = [s for s in STACK_NAMES
                    if stack_spec(s)["cloud"] == "aws" and stack_spec(s).get("scheduler", "slurm") == "slurm"]


def write_files(user_data: str) -> dict[str, str]:
    return {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}


def user_data(stack: str) -> dict[str, str]:
    """'head' and 'compute' (the first pool) user data of the stack's plan."""
    result = stack_result(stack)
    plan, name = result.plan, result.design.name
    lt = plan.named(f"{name}-{result.design.pools[0].name}-template", "aws:ec2/launchTemplate:LaunchTemplate")
    return {"head": plan.named(f"{name}-slurm-head", "aws:ec2/instance:Instance").inputs["userData"],
            "compute": base64.b64decode(lt.inputs["userData"]).decode()}


LISTS = {"head": "/etc/aicluster/head-files.json", "compute": "/etc/aicluster/node-files.json"}


@pytest.fixture
def node(moto_endpoint, tmp_path):
    """moto's S3 with the configuration bucket and every object the plan publishes; `fetch(role)`
    runs the user data's aicluster-fetch on its list into a scratch root."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    plan = stack_result(STACK).plan
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint,
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    texts = user_data(STACK)
    bucket = json.loads(write_files(texts["compute"])[LISTS["compute"]])["bucket"]
    s3.create_bucket(Bucket=bucket)
    objects = s3_objects(plan)
    for key, content in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=as_bytes(content))

    def fetch(role: str, root: Path) -> subprocess.CompletedProcess:
        files = write_files(texts[role])
        work = tmp_path / role
        work.mkdir(exist_ok=True)
        (work / "aicluster-fetch").write_text(files["/opt/aicluster/bin/aicluster-fetch"])
        (work / "files.json").write_text(files[LISTS[role]])
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **FAKE_AWS,
               "AWS_ENDPOINT_URL": moto_endpoint, "AICLUSTER_ROOT": str(root), "AICLUSTER_FETCH_RETRY_S": "0"}
        return subprocess.run([sys.executable, str(work / "aicluster-fetch"), str(work / "files.json")], env=env,
                              capture_output=True, text=True, timeout=120)

    yield SimpleNamespace(s3=s3, bucket=bucket, objects=objects, texts=texts, fetch=fetch)


@pytest.mark.parametrize("role", ["head", "compute"])
def test_fetch_installs_exactly_the_pinned_programs(node, tmp_path, role):
    listing = json.loads(write_files(node.texts[role])[LISTS[role]])
    run = node.fetch(role, tmp_path / "root")
    assert run.returncode == 0, run.stderr
    for entry in listing["files"]:
        installed = tmp_path / "root" / entry["path"].lstrip("/")
        assert installed.read_bytes() == as_bytes(node.objects[entry["key"]])
        assert hashlib.sha256(installed.read_bytes()).hexdigest() == entry["key"].rsplit("/", 1)[1]
        module = entry["path"].startswith("/opt/aicluster/lib/")
        assert installed.stat().st_mode & 0o7777 == (0o644 if module else 0o755)
    # One archive of aicluster.node for every program of the package (render/node_programs.py).
    assert [e["path"] for e in listing["files"] if e["path"].startswith("/opt/aicluster/lib/")] == \
        [f"/opt/aicluster/lib/{artifact(PACKAGED_BY_ROLE[role]).name}"]
    expected = {"head": {"aicluster-sync", "aicluster-secret", "aicluster-install-slurm"},
                "compute": {*NODE_PROGRAMS, "aicluster-node-bootstrap", "aicluster-gpu-healthcheck",
                            "aicluster-mount-storage", "aicluster-resume-job", "aicluster-task-prolog",
                            "aicluster-scratch", "aicluster-containers",
                            # slurm.conf's IMEX prolog on NVL72 clusters (exits 0 elsewhere)
                            "aicluster-imex-config",
                            # what watches the node (slurm_monitoring), started after slurmd
                            "aicluster-monitoring", "aicluster-node-metrics"}}[role]
    assert {Path(e["path"]).name for e in listing["files"] if not e["path"].startswith("/opt/aicluster/lib/")} == expected
    # The entry points run aicluster.node's programs from the archive they were fetched beside.
    for program in ("aicluster-secret", "aicluster-sync") if role == "head" else NODE_PROGRAMS:
        ran = subprocess.run([str(tmp_path / "root" / "opt" / "aicluster" / "bin" / program), "--help"],
                             capture_output=True, text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
        assert ran.returncode == 0 and "usage:" in ran.stdout, ran.stderr


def test_a_changed_object_installs_nothing(node, tmp_path):
    """An object whose content is not what the user data pins (rewritten, corrupted) is refused:
    nothing is installed, so the node never runs a program it was not rendered with."""
    listing = json.loads(write_files(node.texts["compute"])[LISTS["compute"]])
    victim = listing["files"][-1]["key"]
    node.s3.put_object(Bucket=node.bucket, Key=victim, Body=b"#!/bin/bash\necho tampered\n")
    run = node.fetch("compute", tmp_path / "root")
    assert run.returncode == 1
    assert "nothing installed" in run.stderr and victim in run.stderr
    assert not (tmp_path / "root").exists() or not any(p.is_file() for p in (tmp_path / "root").rglob("*"))


def test_a_missing_object_is_retried_then_fails(node, tmp_path):
    listing = json.loads(write_files(node.texts["compute"])[LISTS["compute"]])
    node.s3.delete_object(Bucket=node.bucket, Key=listing["files"][0]["key"])
    run = node.fetch("compute", tmp_path / "root")
    assert run.returncode != 0
    assert "try 10/10" in run.stderr                 # retried (IAM propagation, eventual consistency)
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("stack", AWS_SLURM_STACKS)
def test_fetched_programs_pass_shellcheck_and_compile(stack, tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test: apt-get install shellcheck (.ci/run installs it)"
    plan = stack_result(stack).plan
    objects = s3_objects(plan)
    checked = set()
    for role, text in user_data(stack).items():
        for entry in json.loads(write_files(text)[LISTS[role]])["files"]:
            content, name = objects[entry["key"]], Path(entry["path"]).name
            if isinstance(content, bytes):                  # the archive of aicluster.node
                assert name == f"aicluster-node-{hashlib.sha256(content).hexdigest()[:12]}.pyz", entry["key"]
                with zipfile.ZipFile(io.BytesIO(content)) as archive:
                    for member in archive.namelist():
                        compile(archive.read(member), f"{entry['key']}/{member}", "exec")
            elif content.startswith(("#!/bin/bash", "#!/bin/sh")):
                path = tmp_path / f"{role}-{name}"
                path.write_text(content)
                run = subprocess.run([shellcheck, "--severity=style", str(path)], capture_output=True, text=True)
                assert run.returncode == 0, f"{stack} {entry['key']}:\n{run.stdout}"
            else:
                assert content.startswith("#!/usr/bin/env python3"), entry["key"]
                compile(content, entry["key"], "exec")
            checked.add(name)
    assert {"aicluster-node-bootstrap", "aicluster-gpu-healthcheck", "aicluster-mount-storage"} <= checked
