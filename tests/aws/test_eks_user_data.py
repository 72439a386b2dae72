"""EKS node user data: the MIME multipart the EKS-optimized AL2023 AMI expects (a nodeadm NodeConfig
part, a cloud-config part), read back with Python's email parser; the cloud-config part passes the
real `cloud-init schema`."""
from __future__ import annotations

import base64
import copy
import email
import shutil
import subprocess

import pytest
import yaml

from tests.support import BASE_SPEC, STACK_NAMES, stack_spec
from aicluster.aws.eks_nodes import eks_node_user_data
from aicluster.design.cluster import design_cluster
from aicluster.design.kubernetes import HUGEPAGES_PER_NODE, HUGEPAGES_PER_WORKER_MIB
from aicluster.render.templates import render
from aicluster.spec.cluster import parse_spec

EKS_STACKS = [s for s in STACK_NAMES if stack_spec(s).get("scheduler") == "kubernetes" and stack_spec(s)["cloud"] == "aws"]


def parts(text: str) -> dict[str, str]:
    message = email.message_from_string(text)
    assert message.is_multipart(), "nodeadm reads MIME multipart user data"
    assert message["MIME-Version"] == "1.0"
    found = {}
    for part in message.get_payload():
        assert part.get_content_type() not in found, "one part per type"
        found[part.get_content_type()] = part.get_payload()
    return found


@pytest.fixture(scope="module")
def design():
    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc"}     # EKS needs a way to its API
    return design_cluster(parse_spec(spec))


def test_user_data_is_a_node_config_and_a_cloud_config(design):
    found = parts(eks_node_user_data(design, "gpu"))
    assert set(found) == {"application/node.eks.aws", "text/cloud-config"}
    node_config = yaml.safe_load(found["application/node.eks.aws"])
    assert node_config["apiVersion"] == "node.eks.aws/v1alpha1" and node_config["kind"] == "NodeConfig"
    # p5 has 8 x 3.8 TB of instance store: containerd and kubelet go there.
    assert node_config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    # EKS fills in the cluster (endpoint, CA, CIDR) for a template without an AMI: not ours to set.
    assert "cluster" not in node_config["spec"]
    kubelet = node_config["spec"]["kubelet"]["config"]
    assert kubelet["shutdownGracePeriod"] == "90s"


def test_cloud_config_preallocates_the_huge_pages_efa_uses(design):
    config = yaml.safe_load(parts(eks_node_user_data(design, "gpu"))["text/cloud-config"])
    assert config["bootcmd"] == [["sysctl", "-w", f"vm.nr_hugepages={HUGEPAGES_PER_NODE}"]]
    persisted = next(f for f in config["write_files"] if f["path"] == "/etc/sysctl.d/90-aicluster-hugepages.conf")
    assert persisted["content"].strip() == f"vm.nr_hugepages = {HUGEPAGES_PER_NODE}"
    # What one worker asks for fits in what the node allocates.
    assert HUGEPAGES_PER_WORKER_MIB <= HUGEPAGES_PER_NODE * 2
    assert design.kubernetes.pool("gpu").worker_resources["hugepages-2Mi"] == f"{HUGEPAGES_PER_WORKER_MIB}Mi"


def test_no_huge_pages_without_efa():
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", pools=[{"name": "l40s", "instance_type": "g6e.48xlarge", "max_nodes": 2,
                                                "efa": False}], kubernetes={"api_access": "vpc"})
    design = design_cluster(parse_spec(spec))
    config = yaml.safe_load(parts(eks_node_user_data(design, "l40s"))["text/cloud-config"])
    assert "bootcmd" not in config
    assert [f["path"] for f in config["write_files"]] == ["/etc/aicluster/node.env"]
    assert "hugepages-2Mi" not in design.kubernetes.pool("l40s").worker_resources


def test_node_config_without_instance_store_leaves_storage_alone():
    text = render("k8s/node-config.yaml.j2", cluster="c", pool="p", local_nvme=False, shutdown_grace="90s",
                  shutdown_grace_critical="30s")
    assert "instance" not in yaml.safe_load(text)["spec"]


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_launch_templates_carry_it_and_cloud_init_accepts_it(stack, tmp_path):
    from tests.support.stack_plans import stack_result

    cloud_init = shutil.which("cloud-init")
    assert cloud_init, "cloud-init is required for this test: apt-get install cloud-init (.ci/run installs it)"
    result = stack_result(stack)
    mime = {name: text for name, text in result.files.items() if name.endswith(".mime")}
    assert mime and set(mime) == {f"user-data/{result.design.name}-{p.name}-template.mime" for p in result.design.pools}
    for pool in result.design.pools:
        lt = result.plan.named(f"{result.design.name}-{pool.name}-template", "aws:ec2/launchTemplate:LaunchTemplate")
        text = base64.b64decode(lt.inputs["userData"]).decode()
        assert text == eks_node_user_data(result.design, pool.name)
        cloud_config = parts(text)["text/cloud-config"]
        path = tmp_path / f"{pool.name}.yaml"
        path.write_text(cloud_config)
        run = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True)
        assert run.returncode == 0, f"{stack} {pool.name}: {run.stdout}{run.stderr}"
