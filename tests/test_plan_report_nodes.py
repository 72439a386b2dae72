"""What the plan says about the nodes users touch (issue 15): the login nodes, each Slurm pool's
/scratch (local NVMe as RAID0) and container stack (enroot + pyxis), and the home filesystem, in
`aicluster plan --format json` and `--format markdown` as in text, from the same facts
(login_design.login_facts, node_local_files.node_scratch / containers_json)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from aicluster.catalog.node_local import containers
from aicluster.render.node_local_files import pool_node_local_json
from aicluster.commands.plan_report import markdown, text, to_json
from tests.support.stack_plans import result_with_spec, stack_result, stack_spec_data

KUBERNETES_STACKS = ["aws-p5-eks", "gcp-a3ultra-gke", "gcp-tpu-v5p-gke"]


def _cluster(stack: str) -> dict:
    """The plan's JSON as a tool reads it (through json, so only JSON types count)."""
    return json.loads(json.dumps(to_json(stack_result(stack))))["cluster"]


def _pool(cluster: dict, name: str) -> dict:
    return next(p for p in cluster["pools"] if p["name"] == name)


def test_aws_p5_slurm_json_has_its_login_node():
    login = _cluster("aws-p5-slurm")["login"]
    assert login == {
        "count": 1, "instance_type": "m7i.2xlarge", "hostnames": ["p5-train-login-1"], "root_volume_gib": 100,
        "root_volume_encrypted": True, "public_ip": False, "stateful": False,
        "access": ["SSM Session Manager", "ssh from network.ssh_ingress_cidrs"],
        "slurm": "Slurm client + sackd (configless from slurmctld), no slurmd", "mounts": ["/fsx", "/home"]}


def test_aws_p5_slurm_json_has_home_on_efs():
    home = next(s for s in _cluster("aws-p5-slurm")["storage"] if s["mount"] == "/home")
    assert (home["name"], home["kind"], home["elastic"], home["protect"]) == ("home", "efs", True, True)
    lustre = next(s for s in _cluster("aws-p5-slurm")["storage"] if s["kind"] == "fsx-lustre")
    assert (lustre["elastic"], lustre["deployment_type"], lustre["capacity_gib"]) == (False, "PERSISTENT_2", 24000)


def test_aws_p5_slurm_json_has_scratch_and_containers_per_pool():
    gpu = _pool(_cluster("aws-p5-slurm"), "gpu")
    assert gpu["scratch"] == {"mount": "/scratch", "devices": 8, "device_size": 3800, "total_size": 30400,
                              "unit": "GB", "raid0": True}
    c = containers()
    assert gpu["containers"] == {"enroot_version": c.enroot.version, "pyxis_version": c.pyxis.version,
                                 "pyxis_commit": c.pyxis.commit, "usage": "srun --container-image",
                                 "arch": "amd64", "pinned": True, "gap": None}


def test_text_and_json_say_the_same_of_scratch_containers_and_login():
    result = stack_result("aws-p5-slurm")
    body, cluster = "\n".join(text(result)), _cluster("aws-p5-slurm")
    s, c = _pool(cluster, "gpu")["scratch"], _pool(cluster, "gpu")["containers"]
    assert (f"{s['mount']} RAID0 of {s['devices']} x {s['device_size']} {s['unit']} local NVMe = "
            f"{s['total_size']} {s['unit']}; containers enroot {c['enroot_version']} + pyxis {c['pyxis_version']}"
            in body)
    login = cluster["login"]
    assert f"  {login['count']} x {login['instance_type']}: {login['hostnames'][0]}; " \
           f"{login['root_volume_gib']} GiB encrypted root" in body


def test_gcp_slurm_json_has_its_login_nodes_and_local_ssd_scratch_in_gib():
    cluster = _cluster("gcp-a3mega-slurm")
    login = cluster["login"]
    assert login["count"] == 1 and login["hostnames"] == ["a3mega-train-login-1"]
    assert login["instance_type"] == "n2-standard-8" and login["public_ip"] is False
    assert login["access"][0].startswith("IAP TCP forwarding") and "/home" in login["mounts"]
    assert _pool(cluster, "gpu")["scratch"] == {"mount": "/scratch", "devices": 16, "device_size": 375,
                                                "total_size": 6000, "unit": "GiB", "raid0": True}
    assert _pool(_cluster("gcp-a3ultra-slurm"), "h200")["scratch"]["total_size"] == 12000


def test_three_login_nodes_are_all_named():
    spec = stack_spec_data("aws-p5-slurm")
    spec.setdefault("slurm", {})["login"] = {"count": 3, "instance_type": "m7i.4xlarge", "root_volume_gib": 200}
    login = to_json(result_with_spec("aws-p5-slurm", spec))["cluster"]["login"]
    assert login["hostnames"] == ["p5-train-login-1", "p5-train-login-2", "p5-train-login-3"]
    assert (login["count"], login["instance_type"], login["root_volume_gib"]) == (3, "m7i.4xlarge", 200)


def test_no_login_nodes_is_count_zero_not_a_missing_key():
    spec = stack_spec_data("aws-p5-slurm")
    spec.setdefault("slurm", {})["login"] = {"count": 0}
    result = result_with_spec("aws-p5-slurm", spec)
    login = to_json(result)["cluster"]["login"]
    assert (login["count"], login["hostnames"]) == (0, [])
    assert "- none (slurm.login.count 0): users reach Slurm from the head node only" in markdown(result)


@pytest.mark.parametrize("stack", KUBERNETES_STACKS)
def test_kubernetes_stacks_have_no_login_scratch_or_containers(stack):
    cluster = _cluster(stack)
    assert cluster["login"] is None
    assert all(p["scratch"] is None and p["containers"] is None for p in cluster["pools"])
    assert "### Login nodes" not in markdown(stack_result(stack))


def test_markdown_has_the_login_nodes_and_each_pools_scratch():
    lines = markdown(stack_result("aws-p5-slurm"))
    login = lines.index("### Login nodes")
    assert lines[login + 2].startswith("- 1 x m7i.2xlarge: p5-train-login-1; 100 GiB encrypted root")
    assert "- log in with SSM Session Manager, or ssh from network.ssh_ingress_cidrs" in lines
    assert any(line.startswith("- /scratch RAID0 of 8 x 3800 GB local NVMe = 30400 GB; containers enroot")
               for line in lines)
    assert "- home: Amazon EFS (NFS 4.1)" in "\n".join(lines)


def test_a_slurm_pool_without_local_nvme_has_containers_but_no_scratch():
    """enroot then works on the boot disk (/var/tmp): no /scratch to report, the containers still."""
    design = SimpleNamespace(slurm=object())
    pool = SimpleNamespace(tpu=None, instance=SimpleNamespace(name="m7i.2xlarge", dpkg_arch="amd64"))
    facts = pool_node_local_json(design, pool)
    assert facts["scratch"] is None and facts["containers"]["enroot_version"] == containers().enroot.version
