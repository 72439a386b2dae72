"""Real programs read what the plan renders: cloud-init validates the user data, shellcheck the
scripts. Both are required (CI installs them); a missing tool fails, it does not skip."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from conftest import STACK_NAMES, stack_spec


def require(tool: str) -> str:
    path = shutil.which(tool)
    assert path, f"{tool} is required for this test: apt-get install {tool} (.ci/run installs it)"
    return path


@pytest.fixture(scope="module")
def rendered():
    from aicluster.planner import plan_stack

    return {stack: plan_stack(stack).files for stack in STACK_NAMES}


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
    from aicluster.render import render

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
