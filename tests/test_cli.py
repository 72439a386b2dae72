"""End-to-end: the `aicluster` command through a subprocess, as a user runs it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, STACK_NAMES

CLI = [sys.executable, "-m", "aicluster.cli"]


def aicluster(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "aicluster"
    assert script.exists() or shutil.which("aicluster"), "pip install -e . must install the `aicluster` script"


def test_default_plan_shows_the_p5_cluster():
    run = aicluster("plan")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "stack aws-p5-slurm" in out
    assert "33 NICs: 1 ENA + 32 EFA" in out
    assert "strategy=cluster" in out
    fsx_line = next(line for line in out.splitlines() if "aws:fsx/lustreFileSystem" in line)
    assert "PERSISTENT_2" in fsx_line and "[protect]" in fsx_line and "[retain]" in fsx_line
    assert "91.6 MB/s per GPU" in out
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_example_stack_plans(stack):
    run = aicluster("plan", "--stack", stack, "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["stack"] == stack
    types = {r["type"] for r in doc["plan"]["resources"]}
    assert {"aws:ec2/launchTemplate:LaunchTemplate", "gcp:compute/instanceTemplate:InstanceTemplate",
            "gcp:container/nodePool:NodePool"} & types
    assert doc["balance"]["accelerators"] > 0


def test_markdown_format():
    run = aicluster("plan", "--format", "markdown")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("## aicluster plan: `aws-p5-slurm`")
    assert "| " in run.stdout


def test_out_writes_plan_json_and_rendered_files(tmp_path):
    run = aicluster("plan", "--stack", "aws-p5-slurm", "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert {"user-data/p5-train-gpu-template.yaml", "user-data/p5-train-slurm-head.yaml", "slurm/slurm.conf",
            "slurm/gres.conf", "slurm/cgroup.conf", "slurm/topology.conf", "aicluster/cluster.json",
            "manifest.json"} <= set(plan["files"])
    for name in plan["files"]:
        assert (tmp_path / name).is_file(), name
    slurm_conf = (tmp_path / "slurm" / "slurm.conf").read_text()
    assert "PartitionName=gpu Nodes=gpu-[1-16]" in slurm_conf and "Gres=gpu:h100:8" in slurm_conf
    user_data = (tmp_path / "user-data" / "p5-train-gpu-template.yaml").read_text()
    assert user_data.startswith("#cloud-config")
    assert yaml.safe_load(user_data)["write_files"]


def bad_spec_file(tmp_path: Path, mutate) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml").read_text())
    mutate(doc["config"]["aicluster:cluster"])
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_invalid_fsx_capacity_exits_2_with_the_path_and_allowed_steps(tmp_path):
    path = bad_spec_file(tmp_path, lambda s: s["storage"][0].update(capacity_gib=3000))
    run = aicluster("plan", str(path))
    assert run.returncode == 2
    assert "storage[0].capacity_gib" in run.stderr
    assert "1200, 2400, then multiples of 2400" in run.stderr
    assert "did you mean 2400 or 4800?" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_unknown_instance_type_suggests_the_close_match(tmp_path):
    path = bad_spec_file(tmp_path, lambda s: s["pools"][0].update(instance_type="p5.48xl"))
    run = aicluster("plan", str(path))
    assert run.returncode == 2
    assert "pools[0].instance_type" in run.stderr and "did you mean p5.48xlarge?" in run.stderr


def test_region_mismatch_with_the_provider_is_refused(tmp_path):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml").read_text())
    doc["config"]["aws:region"] = "us-west-2"
    path = tmp_path / "Pulumi.mismatch.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = aicluster("plan", str(path))
    assert run.returncode == 2 and "aws:region" in run.stderr


@pytest.mark.parametrize("content, expected", [
    ("config: [unclosed", "valid YAML"),
    ("config:\n  aws:region: us-east-1\n", "aicluster:cluster"),
    ("just a string\n", "<root>"),
])
def test_broken_files_exit_2(tmp_path, content, expected):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(content)
    run = aicluster("plan", str(path))
    assert run.returncode == 2, run.stdout
    assert expected in run.stderr and "Traceback" not in run.stderr


def test_unknown_stack_suggests_a_close_one():
    run = aicluster("plan", "--stack", "aws-p5-slurmm")
    assert run.returncode == 2
    assert "did you mean aws-p5-slurm?" in run.stderr


def test_schema_is_json_schema():
    from jsonschema import Draft202012Validator

    run = aicluster("schema")
    assert run.returncode == 0
    schema = json.loads(run.stdout)
    Draft202012Validator.check_schema(schema)
    assert "pools" in schema["properties"]


def test_catalog_prints_facts_with_sources():
    run = aicluster("catalog", "p5.48xlarge")
    assert run.returncode == 0, run.stderr
    assert "max EFA interfaces" in run.stdout and "32" in run.stdout and "source" in run.stdout
    overview = aicluster("catalog")
    assert overview.returncode == 0 and "a3-megagpu-8g" in overview.stdout and "PERSISTENT_2" in overview.stdout
    as_json = json.loads(aicluster("catalog", "--format", "json", "h100").stdout)
    assert as_json["name"] == "p5.48xlarge"


def test_catalog_unknown_type_exits_2():
    run = aicluster("catalog", "p5.48xl")
    assert run.returncode == 2 and "did you mean p5.48xlarge?" in run.stderr


def test_stacks_lists_every_stack():
    run = aicluster("stacks")
    assert run.stdout.split() == STACK_NAMES


def test_runs_from_another_directory(tmp_path):
    """The project is found from the package when the working directory is elsewhere."""
    run = aicluster("plan", "--stack", "aws-p4d-small", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
