"""Kubernetes pools whose NVLink domain spans nodes (GB200/GB300 NVL72), on EKS and GKE: the NVIDIA
DRA driver with ComputeDomains, the host's IMEX service off, a Kueue Topology whose NVLink-domain
level the example JobSet requires, and a ComputeDomain per job whose channel its pods claim; every
object valid against the pinned releases' CRDs (ComputeDomain: tests/data/schemas/dra-driver-gpu).

GKE plans the catalog's A4X. EKS uses a type derived from p5.48xlarge and given an NVL72 domain (4
GPUs a node, 72 a domain, 18 nodes, 9-node UltraServers), as tests/test_nvl72_capacity.py does: the
catalog's p6e-gb200 is Arm and needs the AL2023_ARM_64_NVIDIA AMI, which the EKS stacks do not
build yet."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from aicluster.catalog import load_catalog
from aicluster.design.kubernetes import (GPU_CLIQUE_LABEL, HOSTNAME_LABEL, NVLINK_TOPOLOGY, POOL_LABEL,
                                         resource_api_version, versions)
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, CR, GCP_MIN, run_spec
from tests.support.dra_schema import SCHEMAS as DRA_SCHEMAS
from tests.support.manifests import example_jobset, validate, worker_job, worker_pod

NVL = "nvl72-test.36xlarge"
A4X = "a4x-highgpu-4g"        # the catalog's A4X: 4 GB200 a VM, 18 VMs an NVLink domain
KUEUE = versions().charts["kueue"].api_version
DRA = versions().charts["nvidia-dra-driver-gpu"]
RELEASE = "kubernetes:helm.sh/v3:Release"
SUBBLOCK = "cloud.google.com/gce-topology-subblock"
EKS_POOLS = [{"name": "gb200", "instance_type": NVL, "min_nodes": 0, "max_nodes": 18,
              "capacity": {"type": "capacity-block", "reservation_id": CR, "nodes": 18}},
             {"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 2}]
GKE_POOLS = [{"name": "gb200", "instance_type": A4X, "min_nodes": 18, "max_nodes": 18,
              "capacity": {"type": "reservation", "reservation_id": "a4x-reservation"}}]


def _derive(mp: pytest.MonkeyPatch) -> None:
    """The NVL72 test type in the AWS table of the cached catalog, and in the EKS NVIDIA AMI's families."""
    cat = load_catalog()
    derived = dataclasses.replace(cat.instance_types["aws"]["p5.48xlarge"], name=NVL, accelerator_count=4,
                                  nvlink_domain=72, nvlink_domain_source="test", capacity_unit_nodes=9)
    mp.setitem(cat.instance_types["aws"], NVL, derived)
    v = versions()
    families = v.ami_types["gpu"]["instance_families"]
    mp.setitem(v.ami_types["gpu"], "instance_families", [*families, NVL.split(".")[0]])


def _spec(base: dict, pools: list[dict]) -> dict:
    spec = copy.deepcopy(base)
    spec.update(scheduler="kubernetes", pools=copy.deepcopy(pools))
    spec["kubernetes"] = {"api_access": "vpc"} if base["cloud"] == "aws" else \
        {"system_nodes": {"instance_type": "n2-standard-4", "count": 2}}
    return spec


@pytest.fixture(scope="module")
def plans():
    with pytest.MonkeyPatch.context() as mp:
        _derive(mp)
        yield {"eks": run_spec(_spec(AWS_MIN, EKS_POOLS)), "gke": run_spec(_spec(GCP_MIN, GKE_POOLS))}


@pytest.fixture
def nvl72(monkeypatch):
    _derive(monkeypatch)


def _job_docs(plan, pool: str) -> list[dict]:
    (cm,) = [c for c in plan.of_type("kubernetes:core/v1:ConfigMap") if f"train-{pool}.yaml" in c.inputs.get("data", {})]
    return [d for d in yaml.safe_load_all(cm.inputs["data"][f"train-{pool}.yaml"]) if d]


def _kueue(plan, kind: str) -> list[dict]:
    """The Kueue objects of a kind as applied (KubernetesObject: the whole object)."""
    return [dict(r.inputs) for r in plan.of_type(f"kubernetes:{KUEUE}:{kind}")]


def _release(plan, chart: str):
    return next((r for r in plan.of_type(RELEASE) if r.inputs["name"] == chart), None)


# ---------------------------------------------------------------- the DRA driver


@pytest.mark.parametrize("platform, root", [("eks", "/"), ("gke", "/home/kubernetes/bin/nvidia")])
def test_dra_driver_runs_compute_domains_on_the_nvlink_pools(plans, platform, root):
    release = _release(plans[platform], DRA.name)
    assert release is not None and release.inputs["version"] == DRA.version
    assert release.inputs["namespace"] == DRA.namespace
    values = release.inputs["values"]
    # The chart refuses GPU allocation beside the device plugin (templates/validation.yaml).
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == root
    assert values["resourceApiVersion"] == "resource.k8s.io/v1"      # what Kubernetes 1.35 serves
    (term,) = values["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "In", "values": ["gb200"]}]
    keys = {t["key"] for t in values["kubeletPlugin"]["tolerations"]}
    assert "nvidia.com/gpu" in keys
    assert ("kubernetes.io/arch" in keys) == (platform == "gke")     # GKE taints its Arm nodes
    # The chart's default controller affinity wants a control-plane node: neither platform has one.
    (term,) = values["controller"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["key"] == "aicluster.io/role"


@pytest.mark.parametrize("base, pools", [(AWS_MIN, [{"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 2}]),
                                         (GCP_MIN, [{"name": "h100", "instance_type": "a3-megagpu-8g", "max_nodes": 2}])])
def test_no_dra_driver_without_an_nvlink_pool(base, pools):
    plan = run_spec(_spec(base, pools))
    assert _release(plan, DRA.name) is None
    assert not _kueue(plan, "Topology")
    assert "compute-domain" not in yaml.safe_dump([d for p in pools for d in _job_docs(plan, p["name"])])


def test_eks_labels_nvlink_cliques_with_gpu_feature_discovery(plans):
    values = _release(plans["eks"], "nvidia-device-plugin").inputs["values"]
    assert values["gfd"] == {"enabled": True}
    assert values["nfd"]["master"]["nodeSelector"] == {"aicluster.io/role": "system"}


def test_eks_nodes_mask_the_host_imex_service(plans):
    """The DRA driver's IMEX daemons and the host's must not both run (GPU Operator docs, dra-cds)."""
    from aicluster.aws.eks_nodes import eks_node_user_data
    from aicluster.design.cluster import design_cluster

    with pytest.MonkeyPatch.context() as mp:
        _derive(mp)
        design = design_cluster(parse_spec(_spec(AWS_MIN, EKS_POOLS)))
        nvl, hgx = (eks_node_user_data(design, p) for p in ("gb200", "h100"))
    boot = "systemctl disable --now nvidia-imex.service; systemctl mask nvidia-imex.service"
    assert boot in nvl and "nvidia-imex" not in hgx
    cloud_config = yaml.safe_load(nvl.split('Content-Type: text/cloud-config; charset="us-ascii"', 1)[1]
                                  .split("\n--", 1)[0])
    assert ["sh", "-c", boot] in cloud_config["bootcmd"]
    assert ["sysctl", "-w", "vm.nr_hugepages=5128"] in cloud_config["bootcmd"]    # EFA's pages stay


def test_cloud_init_accepts_the_nvlink_nodes_cloud_config(tmp_path):
    """The real `cloud-init schema` reads the cloud-config part of an NVLink pool's user data."""
    import shutil
    import subprocess

    from aicluster.aws.eks_nodes import eks_node_user_data
    from aicluster.design.cluster import design_cluster

    cloud_init = shutil.which("cloud-init")
    assert cloud_init, "cloud-init is required for this test: apt-get install cloud-init (.ci/run installs it)"
    with pytest.MonkeyPatch.context() as mp:
        _derive(mp)
        text = eks_node_user_data(design_cluster(parse_spec(_spec(AWS_MIN, EKS_POOLS))), "gb200")
    path = tmp_path / "gb200.yaml"
    path.write_text(text.split('Content-Type: text/cloud-config; charset="us-ascii"', 1)[1].split("\n--", 1)[0].strip() + "\n")
    run = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_eks_nvlink_pool_gets_no_karpenter_nodepool(plans):
    """The pinned Karpenter does not provision for DRA claims (EKS user guide): the capacity block's
    node group is scaled instead."""
    pools = {r.inputs["metadata"]["name"] for r in plans["eks"].of_type("kubernetes:karpenter.sh/v1:NodePool")}
    assert "gb200" not in pools


# ---------------------------------------------------------------- Kueue topology


@pytest.mark.parametrize("platform, levels", [
    ("gke", ["cloud.google.com/gce-topology-block", SUBBLOCK, "cloud.google.com/gke-nodepool",
             "cloud.google.com/gce-topology-host", HOSTNAME_LABEL]),
    ("eks", [GPU_CLIQUE_LABEL, HOSTNAME_LABEL])])
def test_topology_levels_and_the_flavor_that_names_it(plans, platform, levels):
    (topology,) = _kueue(plans[platform], "Topology")
    validate(topology)
    assert topology["metadata"]["name"] == NVLINK_TOPOLOGY
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == levels
    # The CRD's rules (CEL, not evaluated by jsonschema): unique levels, hostname only last.
    assert len(set(levels)) == len(levels) and levels[-1] == HOSTNAME_LABEL
    flavors = {f["metadata"]["name"]: f for f in _kueue(plans[platform], "ResourceFlavor")}
    for flavor in flavors.values():
        validate(flavor)
    assert flavors["gb200"]["spec"]["topologyName"] == NVLINK_TOPOLOGY
    assert flavors["gb200"]["spec"]["nodeLabels"]       # the CRD: topologyName needs nodeLabels
    assert "topologyName" not in flavors.get("h100", {"spec": {}})["spec"]


def test_gke_flavor_tolerates_the_arm_taint(plans):
    (flavor,) = [f for f in _kueue(plans["gke"], "ResourceFlavor") if f["metadata"]["name"] == "gb200"]
    assert {"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"} in flavor["spec"]["tolerations"]


# ---------------------------------------------------------------- the example JobSet


@pytest.mark.parametrize("platform, level", [("eks", GPU_CLIQUE_LABEL), ("gke", SUBBLOCK)])
def test_jobset_claims_the_channel_of_its_own_compute_domain(plans, platform, level):
    docs = _job_docs(plans[platform], "gb200")
    for doc in docs:
        validate(doc)          # ComputeDomain against the vendored CRD, JobSet against its CRD + batch/v1
    (domain,) = [d for d in docs if d["kind"] == "ComputeDomain"]
    assert (domain["apiVersion"], domain["kind"]) in DRA_SCHEMAS
    jobset = example_jobset(docs)
    job, pod = worker_job(jobset), worker_pod(jobset)
    assert domain["metadata"]["namespace"] == jobset["metadata"]["namespace"]
    assert domain["spec"]["numNodes"] == job["completions"] == job["parallelism"] == 18
    template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    (claim,) = pod["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == template
    (trainer,) = pod["spec"]["containers"]
    assert trainer["resources"]["claims"] == [{"name": claim["name"]}]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "4"       # GPUs stay with the device plugin
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == level
    # The required level is one of the Topology's.
    (topology,) = _kueue(plans[platform], "Topology")
    assert level in [lv["nodeLabel"] for lv in topology["spec"]["levels"]]


def test_gke_job_keeps_the_rdma_networks_and_tolerates_arm(plans):
    """What Cluster Toolkit's nccl-jobset-example.yaml adds on A4X: the RDMA interfaces, the gIB and
    driver host paths, the Arm toleration, the sub-block topology, the ComputeDomain claim."""
    pod = worker_pod(example_jobset(_job_docs(plans["gke"], "gb200")))
    annotations = pod["metadata"]["annotations"]
    assert "networking.gke.io/interfaces" in annotations and annotations["networking.gke.io/default-interface"] == "eth0"
    assert {"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    paths = {v["hostPath"]["path"] for v in pod["spec"]["volumes"] if "hostPath" in v}
    assert {"/home/kubernetes/bin/gib", "/home/kubernetes/bin/nvidia"} <= paths


def test_hgx_job_is_unchanged(plans):
    docs = _job_docs(plans["eks"], "h100")
    assert [d["kind"] for d in docs] == ["JobSet", "PodDisruptionBudget"]
    pod = worker_pod(example_jobset(docs))
    assert "resourceClaims" not in pod["spec"] and "annotations" not in pod["metadata"]


# ---------------------------------------------------------------- versions


def test_resource_api_follows_the_cluster_version():
    assert [resource_api_version(v) for v in ("1.35", "1.34", "1.33", "1.32")] == [
        "resource.k8s.io/v1", "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"]
    with pytest.raises(ValueError):
        resource_api_version("1.31")


@pytest.mark.parametrize("platform, base, pools, pinned", [
    ("eks", AWS_MIN, EKS_POOLS, "1.32"), ("gke", GCP_MIN, GKE_POOLS, "1.31")])
def test_a_pin_below_the_platforms_floor_is_refused_at_the_pool(nvl72, monkeypatch, platform, base, pools, pinned):
    import aicluster.catalog.kubernetes as catalog_kubernetes

    v = versions()
    older = (dataclasses.replace(v, kubernetes=pinned) if platform == "eks"
             else dataclasses.replace(v, gke=dataclasses.replace(v.gke, version=pinned)))
    monkeypatch.setattr(catalog_kubernetes, "versions", lambda: older)
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(base, pools))
    (p,) = [p for p in info.value.problems if "DRA" in p.allowed]
    assert p.path == "pools[0].instance_type" and p.value == pools[0]["instance_type"]
    assert f"{v.nvlink_min_versions[platform]} or later" in p.allowed and pinned in p.allowed
    monkeypatch.undo()
    _derive(monkeypatch)
    parse_spec(_spec(base, pools))        # at the pinned 1.35: accepted


def test_floors_are_the_sourced_ones():
    assert versions().nvlink_min_versions == {"eks": "1.33", "gke": "1.32"}
    assert "1.33 and above" in versions().sources["nvlink-domains"]


def test_eks_capacity_block_pool_starts_empty(nvl72):
    """EKS asks min_nodes 0 of a capacity block's node group; the NVLink rule's static nodes do not
    apply there (the Slurm reasons), and the two rules together still leave one valid spec."""
    spec = parse_spec(_spec(AWS_MIN, EKS_POOLS))
    assert spec.pools[0].min_nodes == 0
    data = _spec(AWS_MIN, EKS_POOLS)
    data["pools"][0]["min_nodes"] = 18
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert [p.path for p in info.value.problems] == ["pools[0].min_nodes"]
    assert "0 with capacity-block on EKS" in info.value.problems[0].allowed


def test_plan_says_what_the_nvlink_pools_get():
    from aicluster.design.cluster import design_cluster
    from aicluster.kubernetes.capacity import capacity_lines

    with pytest.MonkeyPatch.context() as mp:
        _derive(mp)
        eks = capacity_lines(design_cluster(parse_spec(_spec(AWS_MIN, EKS_POOLS))))
    gke = capacity_lines(design_cluster(parse_spec(_spec(GCP_MIN, GKE_POOLS))))
    assert any("scale it to 18 when the capacity block starts" in line for line in eks)
    (line,) = [line for line in gke if "NVLink domains" in line]
    assert f"{DRA.chart} {DRA.version}" in line and SUBBLOCK in line and "gb200: 18 nodes a domain" in line


def test_p6e_gb200_on_eks_boots_the_arm64_nvidia_ami():
    """The catalog's P6e-GB200 (Grace, arm64): its node group runs AL2023_ARM_64_NVIDIA at the pinned
    release, its example job the arm64 training image, with the ComputeDomain as for any NVL72 pool."""
    pools = [{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "min_nodes": 0, "max_nodes": 18,
              "capacity": {"type": "capacity-block", "reservation_id": CR, "nodes": 18}}]
    plan = run_spec(_spec(AWS_MIN, pools))
    v = versions()
    (group,) = [g for g in plan.of_type("aws:eks/nodeGroup:NodeGroup")
                if g.inputs.get("labels", {}).get(POOL_LABEL) == "gb200"]
    assert group.inputs["amiType"] == "AL2023_ARM_64_NVIDIA"
    assert group.inputs["releaseVersion"] == v.ami_types["gpu-arm64"]["release_version"]
    docs = _job_docs(plan, "gb200")
    for doc in docs:
        validate(doc)
    pod = worker_pod(example_jobset(docs))
    assert pod["spec"]["containers"][0]["image"] == v.images["pytorch-training-arm64"]
    assert [d["kind"] for d in docs][0] == "ComputeDomain"
    assert _release(plan, DRA.name) is not None


def test_gke_lets_the_drivers_critical_pods_into_its_namespace(plans):
    """GKE admits system-*-critical pods only where a quota of that scope exists (its kube-system
    quota): the DRA driver's namespace gets one before the chart installs, and only on GKE."""
    (quota,) = plans["gke"].of_type("kubernetes:core/v1:ResourceQuota")
    doc = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": dict(quota.inputs["metadata"]),
           "spec": dict(quota.inputs["spec"])}
    validate(doc)
    assert doc["metadata"]["namespace"] == DRA.namespace
    (scope,) = doc["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["scopeName"] == "PriorityClass" and set(scope["values"]) == {"system-node-critical",
                                                                              "system-cluster-critical"}
    assert int(doc["spec"]["hard"]["pods"]) >= 3 * 18
    release = _release(plans["gke"], DRA.name)
    assert quota.urn in release.dependencies
    assert not plans["eks"].of_type("kubernetes:core/v1:ResourceQuota")


def test_gke_a4x_nodes_get_the_arm64_gib_installer(plans):
    """A4X is Arm (Grace): its nodes run the gIB plugin's arm64 build, in a DaemonSet that selects
    only the arm64 accelerators (Cluster Toolkit's gke-a4x installs nccl-plugin-gib-arm64)."""
    installers = [d for d in plans["gke"].of_type("kubernetes:apps/v1:DaemonSet")
                  if d.inputs["metadata"]["name"].startswith("nccl-")]
    (ds,) = installers
    assert ds.inputs["metadata"]["name"] == "nccl-rdma-installer-arm64"
    spec = ds.inputs["spec"]["template"]["spec"]
    assert [c["image"] for c in spec["initContainers"]] == [versions().nccl_installers["rdma"].image_arm64]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["nvidia-gb200"]


def test_gke_mixed_architectures_get_one_installer_each():
    """An x86_64 GPU pool beside A4X keeps its own installer and no Arm toleration. (A4 beside A4X,
    both gIB, would be the same stack on two architectures; that mix does not plan yet: the RDMA
    fabric is laid out for the first pool's NIC count.)"""
    pools = [*GKE_POOLS, {"name": "h100", "instance_type": "a3-megagpu-8g", "max_nodes": 2}]
    plan = run_spec(_spec(GCP_MIN, pools))
    installers = {d.inputs["metadata"]["name"]: d.inputs["spec"]["template"]["spec"]
                  for d in plan.of_type("kubernetes:apps/v1:DaemonSet") if d.inputs["metadata"]["name"].startswith("nccl-")}
    assert set(installers) == {"nccl-tcpxo-installer", "nccl-rdma-installer-arm64"}
    accelerators = {name: spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] for name, spec in installers.items()}
    assert accelerators == {"nccl-tcpxo-installer": ["nvidia-h100-mega-80gb"],
                            "nccl-rdma-installer-arm64": ["nvidia-gb200"]}
    # Only the arm64 pool tolerates GKE's Arm taint.
    flavors = {f["metadata"]["name"]: f for f in _kueue(plan, "ResourceFlavor")}
    arm = {"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"}
    assert arm in flavors["gb200"]["spec"]["tolerations"] and arm not in flavors["h100"]["spec"]["tolerations"]
