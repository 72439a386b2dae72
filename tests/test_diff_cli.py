"""`aicluster diff OLD NEW` end to end (issue 27 item 3): on the default stack, a routine edit (another
instance type, a bigger pool, a new pool) exits 0 with the right actions and what it does to running
jobs; a dangerous one (an FSx deployment type change, a capacity decrease) exits 3 naming the
filesystem. A GCP stack and a Kubernetes stack, the JSON form, and bad input (exit 2)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from aicluster import cli
from aicluster.commands.stacks import read_stack

STACK = "aws-p5-slurm"
FSX = "p5-train-fsx-fs"


def edited(tmp_path: Path, stack: str, edit, name: str = "edited") -> str:
    """The stack's file with its spec edited, written as another stack file (another stack name)."""
    config = copy.deepcopy(read_stack(stack).config)
    edit(config["aicluster:cluster"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return str(path)


def diff(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["diff", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def pool0(**keys):
    return lambda spec: spec["pools"][0].update(keys)


def fsx(**keys):
    def edit(spec):
        spec["storage"][0].update(keys)
        for key in [k for k, v in keys.items() if v is None]:
            del spec["storage"][0][key]
    return edit


def section(out: str, title: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(f"  {title}: ")]


def actions(out: str) -> dict[str, str]:
    """resource name -> action, from the per-component lines ("    ~ update  NAME (TYPE)...")."""
    found = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] in ("+", "~", "+-", "-") and words[1] in ("create", "update", "replace", "delete"):
            found[words[2]] = words[1]
    return found


# --- routine edits: exit 0 ------------------------------------------------------------------------


def test_another_instance_type_is_a_new_template_version_rolled_onto_idle_nodes(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, pool0(instance_type="p5e.48xlarge")))
    assert code == 0, out + err
    assert out.splitlines()[1].startswith("0 create, ") and ", 0 replace, 0 delete" in out.splitlines()[1]
    assert actions(out)["p5-train-gpu-template"] == "update"
    assert "instanceType" in next(l for l in out.splitlines() if "p5-train-gpu-template" in l)
    [nodes] = [line for line in section(out, "new nodes only") if line.startswith("pool gpu")]
    assert "a new launch template version" in nodes and "reconcile loop's roll" in nodes
    assert "at most 1 node at a time" in nodes          # 10 % of 16 nodes, at least one (cluster.json)
    assert any(line.startswith("head files slurm/slurm.conf") for line in section(out, "applies live"))
    assert section(out, "head restart") == ["nothing"] and section(out, "data lost") == ["nothing"]
    assert "STATEFUL RESOURCE" not in out


def test_a_bigger_pool_changes_slurm_conf_live_and_replaces_nothing(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, pool0(max_nodes=32)))
    assert code == 0, out + err
    assert set(actions(out).values()) == {"update"}
    assert any("slurm/slurm.conf" in line for line in section(out, "applies live"))
    assert section(out, "head restart") == ["nothing"]


def test_a_new_pool_is_created_and_touches_nothing_stateful(capsys, tmp_path):
    def add_pool(spec):
        spec["pools"].append({**spec["pools"][0], "name": "extra", "min_nodes": 0, "max_nodes": 2})
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, add_pool))
    assert code == 0, out + err
    found = actions(out)
    assert found["p5-train-extra-template"] == "create"
    assert not {"replace", "delete"} & set(found.values())
    assert any(line.startswith("pool extra: new") for line in section(out, "new nodes only"))


def test_a_capacity_increase_is_an_update_in_place(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, fsx(capacity_gib=48000)))
    assert code == 0, out + err
    assert actions(out)[FSX] == "update"
    assert "storageCapacity" in next(l for l in out.splitlines() if FSX in l)


def test_a_bigger_head_node_restarts_it_and_says_what_that_does_to_jobs(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(
        tmp_path, STACK, lambda spec: spec["slurm"].update(head_node={"instance_type": "m7i.4xlarge"})))
    assert code == 0, out + err     # the head keeps its disk and id: stopped and started, not replaced
    assert actions(out) == {"p5-train-slurm-head": "update"}
    [restart] = section(out, "head restart")
    assert restart.startswith("head node p5-train-slurm-head is stopped and started to change instanceType")
    assert "running jobs keep running" in restart


# --- dangerous edits: exit 3 ----------------------------------------------------------------------


@pytest.mark.parametrize("edit, reason", [
    (fsx(deployment_type="SCRATCH_2", throughput_mbps_per_tib=None), "deploymentType changed (PERSISTENT_2 -> SCRATCH_2)"),
    (fsx(deployment_type="PERSISTENT_1", throughput_mbps_per_tib=200), "deploymentType changed (PERSISTENT_2 -> PERSISTENT_1)"),
    (fsx(capacity_gib=12000), "storageCapacity decreased (24000 -> 12000)"),
], ids=["scratch-2", "persistent-1", "capacity-decrease"])
def test_a_filesystem_replacement_exits_3_naming_it(capsys, tmp_path, edit, reason):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, edit))
    assert code == 3, out + err
    loud = [line for line in out.splitlines() if line.startswith("!!")]
    assert "STATEFUL RESOURCE WOULD BE REPLACED OR DELETED" in loud[0]
    assert f"REPLACE filesystem {FSX} (aws:fsx/lustreFileSystem:LustreFileSystem): {reason}" in loud[1]
    assert "protect" in loud[2]
    assert actions(out)[FSX] == "replace"
    assert section(out, "data lost") == [f"filesystem {FSX} is replaced: jobs reading or writing it fail and its "
                                         "data is gone"]


def test_a_renamed_filesystem_is_deleted_and_exits_3(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, fsx(name="data")))
    assert code == 3, out + err
    assert actions(out)[FSX] == "delete" and actions(out)["p5-train-data-fs"] == "create"
    assert f"DELETE filesystem {FSX}" in out


def test_a_head_node_moved_to_the_public_subnet_is_replaced_and_exits_3(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(
        tmp_path, STACK, lambda spec: spec["slurm"].update(head_node={"public_ip": True})))
    assert code == 3, out + err
    assert "REPLACE head-node p5-train-slurm-head (aws:ec2/instance:Instance): subnetId changed" in out
    assert any(line.startswith("head node p5-train-slurm-head is replaced") for line in section(out, "head restart"))
    assert section(out, "data lost") == ["head-node p5-train-slurm-head is replaced: slurmctld's saved state "
                                         "(the queue, job records, reservations) is gone with it"]


def test_json_names_the_dangerous_resource(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, fsx(capacity_gib=12000)), "--format", "json")
    report = json.loads(out)
    assert code == report["exit_code"] == 3
    assert [(d["name"], d["action"], d["stateful"]) for d in report["dangerous"]] == [(FSX, "replace", "filesystem")]
    assert report["summary"]["replace"] == 1
    assert report["running_jobs"]["data_loss"]


# --- other clouds and schedulers ------------------------------------------------------------------


def test_gcp_a_bigger_pool_replaces_its_instance_template_only(capsys, tmp_path):
    """GCP instance templates are immutable: the pool's template is replaced (created before the old
    one goes) and the nodes roll; nothing stateful is touched."""
    stack = "gcp-a3mega-slurm"
    code, out, err = diff(capsys, stack, edited(tmp_path, stack, pool0(max_nodes=32)))
    assert code == 0, out + err
    replaced = [name for name, action in actions(out).items() if action == "replace"]
    assert replaced == ["a3mega-train-gpu-template"], out
    [nodes] = section(out, "new nodes only")
    assert nodes.startswith("pool gpu: a new instance template") and "reconcile loop's roll" in nodes


def test_gcp_a_managed_lustre_throughput_change_exits_3(capsys, tmp_path):
    stack = "gcp-a3mega-slurm"
    code, out, err = diff(capsys, stack, edited(tmp_path, stack, fsx(throughput_mbps_per_tib=250)))
    assert code == 3, out + err
    assert "REPLACE filesystem a3mega-train-scratch-fs (gcp:lustre/instance:Instance): " \
           "perUnitStorageThroughput changed (500 -> 250)" in out


def test_eks_another_instance_type_rolls_the_node_group(capsys, tmp_path):
    stack = "aws-p5-eks"
    code, out, err = diff(capsys, stack, edited(tmp_path, stack, pool0(instance_type="p5e.48xlarge")))
    assert code == 0, out + err
    assert "Running jobs (kubernetes):" in out
    rolling = [line for line in section(out, "new nodes only") if line.startswith("node group ")]
    assert rolling and "rolling update" in rolling[0] and "launchTemplate" in rolling[0]


# --- bad input: exit 2 ----------------------------------------------------------------------------


def test_an_unknown_stack_exits_2_with_a_close_match(capsys):
    code, out, err = diff(capsys, STACK, "aws-p5-slurn")
    assert code == 2 and out == ""
    assert "aws-p5-slurn" in err and "did you mean aws-p5-slurm?" in err


def test_a_missing_file_exits_2(capsys, tmp_path):
    code, out, err = diff(capsys, str(tmp_path / "nope.yaml"), STACK)
    assert code == 2 and "Traceback" not in err and "nope.yaml" in err


def test_an_invalid_spec_exits_2_naming_the_path(capsys, tmp_path):
    code, out, err = diff(capsys, STACK, edited(tmp_path, STACK, pool0(max_nodes=-1)))
    assert code == 2 and "pools[0].max_nodes" in err
