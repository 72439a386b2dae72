"""NVLink-domain health end to end: the pool's design says how many nodes its domain has, the node's
env (Slurm cloud-init node.env, the Kubernetes agent's ConfigMap) carries it, and the health check
reads that very text to check the IMEX domain (host IMEX on Slurm, the DRA driver's on Kubernetes).

The pools are the catalog's p6e-gb200.36xlarge (18 nodes a domain; AWS also sells 9-node UltraServers)."""
from __future__ import annotations

import yaml

from aicluster.design.cluster import design_pool
from aicluster.kubernetes import health as k8s_health
from aicluster.node import health_agent as agent
from aicluster.render.templates import render
from tests.support.imex import Nvl72Node, domain_status, down

NVL = "p6e-gb200.36xlarge"

BLOCK = "cr-0123456789abcdef0"


def _pool(max_nodes: int, instance_type: str = NVL):
    return design_pool(instance_type, max_nodes=max_nodes, min_nodes=max_nodes, capacity="capacity-block",
                       reservation_id=BLOCK)


def test_a_pool_of_an_nvl72_type_is_its_domain():
    assert _pool(18).nvlink_domain_nodes == 18
    assert _pool(9).nvlink_domain_nodes == 9          # a u-p6e-gb200x36 UltraServer
    assert design_pool("p5.48xlarge", max_nodes=4).nvlink_domain_nodes == 1


def _node_env(nvlink_domain_nodes: int) -> str:
    """node.env of a GCP compute node as cloud-init/compute.yaml.j2 writes it (no Slurm)."""
    nic = dict.fromkeys(("stack", "host_nics", "gpu_nics", "lib_dir", "nccl_plugin_image", "rxdm_image",
                         "apt_repository", "apt_packages"), "")
    doc = yaml.safe_load(render("cloud-init/compute.yaml.j2", cloud="gcp", cluster="c", pool="gb200", gpus=4,
                                fabric_kind="rdma", fabric_devices=0, nic=nic, fabric_script="", mount_script="",
                                slurm=None, nvlink_domain_nodes=nvlink_domain_nodes))
    return {f["path"]: f["content"] for f in doc["write_files"]}["/etc/aicluster/node.env"]


def test_node_env_names_the_domain_only_on_nvlink_domain_nodes():
    assert "AICLUSTER_NVLINK_DOMAIN_NODES=18\n" in _node_env(18)
    assert "AICLUSTER_NVLINK_DOMAIN_NODES" not in _node_env(1)


def test_the_rendered_node_env_drives_the_imex_check(tmp_path):
    """The rendered node.env, read by the real check: a degraded domain drains the node."""
    node = Nvl72Node(tmp_path)
    node.write_env(_node_env(18))
    node.imex(n=domain_status(links=down(11), domain="DEGRADED"))
    run = node.run({"SLURMD_NODENAME": "gb200-4"})
    assert run.returncode == 1
    assert node.calls("scontrol")[-1].startswith(
        "update nodename=gb200-4 state=drain reason=aicluster-imex-domain: imex: IMEX domain DEGRADED: 17/18")


def test_kubernetes_expectations_check_the_domain_the_dra_way():
    assert k8s_health.expectations(4, "efa", 4, 18).endswith("AICLUSTER_NVLINK_DOMAIN_NODES=18\nAICLUSTER_IMEX=dra\n")
    assert "NVLINK" not in k8s_health.expectations(8, "efa", 32)


def _like_the_agent(node: Nvl72Node, env: str) -> agent.CheckResult:
    node.env_file.write_text(env)
    done = node.run()       # the manual role, as the agent runs it: it reports, never drains
    return agent.parse_check(done.returncode, done.stdout, done.stderr)


def test_the_agent_taints_an_nvl72_node_whose_host_imex_would_fight_the_dra_driver(tmp_path):
    node = Nvl72Node(tmp_path)
    env = k8s_health.expectations(4, "efa", 2, 18)
    node.imex(service="inactive")
    assert _like_the_agent(node, env).outcome == "pass"
    node.imex(service="active")
    result = _like_the_agent(node, env)
    assert result.outcome == "fail" and result.failures[0][0] == "imex"


def test_the_agent_taints_an_nvl72_node_with_a_gpu_off_the_fabric(tmp_path):
    node = Nvl72Node(tmp_path)
    node.imex(service="inactive")
    node.gpus(state="Completed", status="Failure", bad=1)
    result = _like_the_agent(node, k8s_health.expectations(4, "efa", 2, 18))
    assert result.outcome == "fail" and result.failures[0][0] == "nvlink-fabric"
    # Registration still running: confirmed on the agent's next run, as a timeout is.
    node.gpus(state="In Progress", status="In Progress", bad=1)
    assert _like_the_agent(node, k8s_health.expectations(4, "efa", 2, 18)).timeouts_only
