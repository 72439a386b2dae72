"""Kueue: the ClusterQueue's quotas are the pools' totals (computed here from the catalog, not from
aicluster's design), and the queue, flavors, node groups and the example job agree with each other
so that an admitted job lands on its pool with every GPU and EFA device of each node."""
from __future__ import annotations

import copy

import pytest
import yaml

from tests.support import BASE_SPEC
from tests.support.manifests import example_jobset, worker_job, worker_pod
from aicluster.catalog import load_catalog
from aicluster.design.kubernetes import EXAMPLES_CONFIGMAP, versions

KUEUE = versions().charts["kueue"].api_version
CQ = f"kubernetes:{KUEUE}:ClusterQueue"
RF = f"kubernetes:{KUEUE}:ResourceFlavor"
LQ = f"kubernetes:{KUEUE}:LocalQueue"
WPC = f"kubernetes:{KUEUE}:WorkloadPriorityClass"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
POOLS = [
    {"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 12, "min_nodes": 4},
    {"name": "a100", "instance_type": "a100", "max_nodes": 3},                    # alias: p4d.24xlarge
    {"name": "l40s", "instance_type": "g6e.48xlarge", "max_nodes": 2, "efa": False},
]


@pytest.fixture(scope="module")
def plan():
    from tests.support import run_spec

    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", pools=copy.deepcopy(POOLS), kubernetes={"api_access": "vpc"})
    return run_spec(spec)


def expected_totals(pool: dict) -> dict[str, str]:
    """The pool's totals at max_nodes, from the catalog's published facts."""
    itype = load_catalog().resolve("aws", pool["instance_type"])
    n = pool["max_nodes"]
    efa = itype.max_efa_interfaces if pool.get("efa", True) else 0
    return {"cpu": str(itype.vcpu * n), "memory": f"{itype.memory_gib * n}Gi",
            "nvidia.com/gpu": str(itype.accelerator_count * n), "vpc.amazonaws.com/efa": str(efa * n),
            # 5128 pre-allocated 2 MiB pages per EFA node (EKS user guide, node-efa)
            "hugepages-2Mi": f"{5128 * 2 * n if efa else 0}Mi"}


def quotas(plan) -> dict[str, dict[str, str]]:
    (queue,) = plan.of_type(CQ)
    (group,) = queue.inputs["spec"]["resourceGroups"]
    out = {}
    for flavor in group["flavors"]:
        # The CRD's rule: each flavor lists the covered resources, in the same order.
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
        out[flavor["name"]] = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    return out


def test_cluster_queue_quotas_are_the_pools_totals(plan):
    assert quotas(plan) == {p["name"]: expected_totals(p) for p in POOLS}


def test_quotas_cover_gpus_efa_cpu_and_memory(plan):
    (queue,) = plan.of_type(CQ)
    covered = queue.inputs["spec"]["resourceGroups"][0]["coveredResources"]
    assert {"nvidia.com/gpu", "vpc.amazonaws.com/efa", "cpu", "memory"} <= set(covered)
    # Every resource a worker requests is covered, or Kueue could never admit the job.
    for cm in plan.of_type("kubernetes:core/v1:ConfigMap"):
        for key, text in cm.inputs["data"].items():
            if key.endswith(".yaml"):
                jobset = example_jobset([d for d in yaml.safe_load_all(text) if d])
                requests = worker_pod(jobset)["spec"]["containers"][0]["resources"]["requests"]
                assert set(requests) <= set(covered), key


def test_flavors_select_their_pools_node_group(plan):
    groups = {g.inputs["labels"]["aicluster.io/pool"]: g.inputs for g in plan.of_type(NODE_GROUP)
              if "aicluster.io/pool" in g.inputs.get("labels", {})}
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in plan.of_type(RF)}
    assert set(flavors) == set(groups) == {p["name"] for p in POOLS}
    for name, spec in flavors.items():
        labels = groups[name]["labels"]
        assert all(labels.get(k) == v for k, v in spec["nodeLabels"].items())
        for taint in groups[name]["taints"]:
            assert {"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_local_queue_feeds_the_cluster_queue_from_the_training_namespace(plan):
    (queue,), (local,) = plan.of_type(CQ), plan.of_type(LQ)
    assert local.inputs["spec"]["clusterQueue"] == queue.inputs["metadata"]["name"]
    assert local.inputs["metadata"]["namespace"] == "training"
    assert queue.inputs["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}


def jobs(plan) -> dict[str, list[dict]]:
    (cm,) = [c for c in plan.of_type("kubernetes:core/v1:ConfigMap") if c.inputs["metadata"]["name"] == EXAMPLES_CONFIGMAP]
    return {key: [d for d in yaml.safe_load_all(text) if d] for key, text in cm.inputs["data"].items()
            if key.endswith(".yaml")}


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p["name"])
def test_example_job_takes_every_gpu_and_efa_device_of_each_node(plan, pool):
    docs = jobs(plan)[f"train-{pool['name']}.yaml"]
    job = example_jobset(docs)
    itype = load_catalog().resolve("aws", pool["instance_type"])
    efa = itype.max_efa_interfaces if pool.get("efa", True) else 0
    spec, pod = worker_job(job), worker_pod(job)["spec"]
    container = pod["containers"][0]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert limits == requests                                  # Guaranteed; hugepages need it
    assert requests["nvidia.com/gpu"] == str(itype.accelerator_count)
    if efa:
        assert requests["vpc.amazonaws.com/efa"] == str(efa)
        assert requests["hugepages-2Mi"] == "5120Mi"
    else:
        assert "vpc.amazonaws.com/efa" not in requests and "hugepages-2Mi" not in requests
    # Gang: all workers in one admission, one per node, indexed ranks.
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == plan.of_type(LQ)[0].inputs["metadata"]["name"]
    assert job["spec"]["suspend"] is True and spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == pool["max_nodes"]
    # The workers fit the quota (one per node, max_nodes of them).
    totals = expected_totals(pool)
    assert int(requests["cpu"]) * pool["max_nodes"] <= int(totals["cpu"])
    assert int(requests["memory"][:-2]) * pool["max_nodes"] <= int(totals["memory"][:-2])
    # They land on the pool and tolerate its taint.
    assert pod["nodeSelector"] == {"aicluster.io/pool": pool["name"]}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # /dev/shm in memory, the filesystem claim, the script.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert volumes[mounts["/fsx"]]["persistentVolumeClaim"] == {"claimName": "fsx"}
    claims = {c.inputs["metadata"]["name"] for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert "fsx" in claims
    # The NCCL environment of aws-ofi-nccl doc/efa-env-var.md: no variables it says to leave out.
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["NCCL_DEBUG"] == "INFO"
    assert not {"FI_PROVIDER", "NCCL_PROTO", "NCCL_MIN_CHANNELS", "NCCL_BUFFSIZE", "FI_EFA_FORK_SAFE",
                "FI_EFA_ENABLE_SHM_TRANSFER"} & set(env)
    assert not [k for k in env if k.startswith("RDMAV_")]
    assert ("FI_EFA_USE_DEVICE_RDMA" in env) == bool(efa)
    # torchrun's rendezvous: worker 0 through the JobSet's headless service (named after the JobSet;
    # pod hostnames <jobset>-<replicated job>-<job index>-<pod index>), resolvable before it is ready.
    assert job["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert "subdomain" not in pod                 # JobSet sets it
    command = container["args"][0]
    assert f"--nnodes={pool['max_nodes']}" in command and f"--nproc-per-node={itype.accelerator_count}" in command
    (replicated,) = job["spec"]["replicatedJobs"]
    name = job["metadata"]["name"]
    assert replicated["replicas"] == 1
    assert f"--master-addr={name}-{replicated['name']}-0-0.{name}" in command
