"""Real programs read what the plan renders: cloud-init validates the user data, shellcheck the
scripts. Both are required (CI installs them); a missing tool fails, it does not skip."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from tests.support import STACK_NAMES, stack_spec


def require(tool: str) -> str:
    path = shutil.which(tool)
    assert path, f"{tool} is required for this test: apt-get install {tool} (.ci/run installs it)"
    return path


@pytest.fixture(scope="module")
def rendered():
    from tests.support.stack_plans import stack_result

    return {stack: stack_result(stack).files for stack in STACK_NAMES}


def test_user_data_passes_cloud_init_schema(rendered, tmp_path):
    cloud_init = require("cloud-init")
    for stack, files in rendered.items():
        for name, content in files.items():
            if not (name.startswith("user-data/") and name.endswith(".yaml")):
                continue   # .mime (EKS nodes): tests/aws/test_eks_user_data.py checks each part
            path = tmp_path / name.replace("/", "_")
            path.write_text(content)
            run = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True)
            assert run.returncode == 0, f"{stack} {name}: {run.stdout}{run.stderr}"


def test_embedded_scripts_pass_shellcheck(rendered, tmp_path):
    shellcheck = require("shellcheck")
    checked = 0
    for stack, files in rendered.items():
        for name, content in files.items():
            if name.startswith("bin/") and content.startswith("#!/bin/bash"):
                path = tmp_path / f"{stack}-{name.replace('/', '-')}"
                path.write_text(content)
                run = subprocess.run([shellcheck, "--severity=style", str(path)], capture_output=True, text=True)
                assert run.returncode == 0, f"{stack} {name}:\n{run.stdout}"
                checked += 1
            if not (name.startswith("user-data/") and name.endswith(".yaml")):
                continue
            for entry in yaml.safe_load(content).get("write_files", []):
                if entry["content"].startswith("#!/bin/bash"):
                    path = tmp_path / f"{stack}-{entry['path'].rsplit('/', 1)[-1]}.sh"
                    path.write_text(entry["content"])
                    run = subprocess.run([shellcheck, "--severity=style", str(path)], capture_output=True, text=True)
                    assert run.returncode == 0, f"{stack} {name} {entry['path']}:\n{run.stdout}"
                    checked += 1
    assert checked >= len(STACK_NAMES)


def test_mount_script_runs_and_is_idempotent(tmp_path):
    """Run the rendered script for real, with stub mount tools, twice: one fstab line, mounts tried."""
    from aicluster.aws.storage import LUSTRE_MOUNT_OPTIONS
    from aicluster.mounts import Mount
    from aicluster.render.templates import render

    mount = Mount("fs-0123.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx", "lustre", LUSTRE_MOUNT_OPTIONS, "lustre-aws")
    script = tmp_path / "mount-storage"
    script.write_text(render("scripts/mount-storage.sh.j2", mounts=[mount]))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls"
    for name, body in {"modinfo": "exit 0", "mountpoint": "exit 1", "mount": f'echo "mount $*" >> {calls}'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    tree = tmp_path / "root"
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(tree)}
    for _ in range(2):
        run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    assert (tree / "etc" / "fstab").read_text().splitlines() == [mount.fstab_line()]
    assert (tree / "fsx").is_dir()
    assert calls.read_text().splitlines() == ["mount /fsx", "mount /fsx"]


def test_published_python_programs_compile(rendered):
    """The head node runs these with its system python3: they must at least compile."""
    compiled = 0
    for stack, files in rendered.items():
        for name, content in files.items():
            if content.startswith("#!") and "python3" in content.splitlines()[0]:
                compile(content, f"{stack}:{name}", "exec")
                compiled += 1
    assert compiled >= 2 * len([s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm"])


# --- one copy of each shared thing (issue 12): one head template, one node template, one manifest ---


def _slurm_stacks(rendered):
    return {s: f for s, f in rendered.items() if "manifest.json" in f}


def test_one_head_and_one_node_template_for_both_clouds():
    from aicluster.render.templates import TEMPLATES

    names = sorted(p.name for p in (TEMPLATES / "cloud-init").glob("*.j2"))
    assert "gcp-head.yaml.j2" not in names and "head.yaml.j2" in names
    assert "gcp-compute.yaml.j2" not in names and "compute.yaml.j2" in names   # one node template, per-cloud blocks


def test_heads_of_both_clouds_share_their_cloud_config(rendered):
    """The same packages, units and boot order on both clouds; only where the programs come from
    differs (AWS fetches them, EC2 taking 16 KB of user data; GCP carries them)."""
    heads = {}
    for stack, files in _slurm_stacks(rendered).items():
        (name,) = [n for n in files if n.startswith("user-data/") and n.endswith("-head.yaml")]
        heads[stack.split("-")[0]] = yaml.safe_load(files[name])
    assert set(heads) == {"aws", "gcp"}
    aws, gcp = heads["aws"], heads["gcp"]
    def packages(head):   # Slurm is no package: aicluster-install-slurm builds it (catalog/slurm_release.yaml)
        return {p if isinstance(p, str) else tuple(p) for p in head["packages"]}

    assert packages(aws) - packages(gcp) == {"python3-boto3"}

    def boot(head):   # the boot commands but the fetch, with the munge secret's name left out
        return [[a for a in c if not (a.startswith("arn:") or a.startswith("projects/"))]
                for c in head["runcmd"] if c[0] != "/opt/aicluster/bin/aicluster-fetch"]

    assert boot(aws) == boot(gcp)
    assert aws["runcmd"][1] == ["/opt/aicluster/bin/aicluster-fetch", "/etc/aicluster/head-files.json"]

    def shared(head):
        return {f["path"]: f for f in head["write_files"] if f["path"].startswith("/etc/systemd/system/")}

    assert shared(aws) == shared(gcp) and len(shared(aws)) == 4   # sync and reconcile: service + timer each
    for head in heads.values():
        assert any(f["path"] == "/etc/systemd/resolved.conf.d/aicluster.conf" for f in head["write_files"])
    sync = {cloud: json.loads(next(f["content"] for f in h["write_files"] if f["path"] == "/etc/aicluster/sync.json"))
            for cloud, h in heads.items()}
    assert sync["gcp"].pop("storage") == "gcs" and set(sync["aws"]) == set(sync["gcp"]) == {"bucket", "prefix", "region"}


def test_the_published_manifest_is_one_shape_on_both_clouds(rendered):
    """Same Slurm files, programs and run order on both clouds; the mount script at one path on
    every node (the GCP head had it in /opt/aicluster/bin); modules imported by the programs 0644
    (the power core, aicluster_slurm.py then, was 0755 on the AWS head)."""
    from aicluster.aws.slurm import PUBLISHED_KEYS as AWS_KEYS
    from aicluster.gcp.slurm import PUBLISHED_KEYS as GCP_KEYS
    from aicluster.render.slurm_files import ARTIFACT_KEY, MOUNT_SCRIPT

    for stack, files in _slurm_stacks(rendered).items():
        keys = AWS_KEYS if stack.startswith("aws") else GCP_KEYS
        # (AWS: the programs the head, the nodes and the login nodes fetch at boot are under boot/,
        # compute/ and login/; monitoring/ holds the alert rules and dashboards plan writes, not
        # bucket objects.)
        published = {n for n in files if not n.startswith(("user-data/", "boot/", "compute/", "login/", "monitoring/"))}
        # One bucket object per published file; the archive of aicluster.node is bytes, not a
        # rendered text (tests/scripts/test_node_programs.py checks it).
        assert published | {ARTIFACT_KEY} == set(keys), stack
        manifest = json.loads(files["manifest.json"])
        entries = {e["key"]: e for e in manifest["files"]}
        assert set(entries) == published - {"manifest.json"} | {ARTIFACT_KEY}, stack
        assert entries["bin/aicluster-mount-storage"]["path"] == MOUNT_SCRIPT
        assert entries["bin/aicluster-mount-storage"]["run"] == [MOUNT_SCRIPT]
        for key, entry in entries.items():
            name = key.rsplit("/", 1)[1]
            if key == ARTIFACT_KEY:
                assert entry["mode"] == "0644", key
            elif key.startswith("bin/"):
                assert entry["mode"] == ("0644" if name.endswith(".py") and name[:-3].isidentifier() else "0755"), key
            else:
                assert entry["mode"] == "0644", key
        runs = [e["run"][0].rsplit("/", 1)[1] for e in manifest["files"] if e.get("run")]
        assert runs[:2] == ["aicluster-mount-storage", "aicluster-accounting"], stack
        assert {link["target"] for link in manifest["links"]} == {
            "aicluster-power.py" if stack.startswith("aws") else "aicluster-gcp-power.py"}
