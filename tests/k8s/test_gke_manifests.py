"""Every manifest aicluster renders on GKE validates against the pinned Kubernetes version's OpenAPI
schemas (kubernetes-validate, strict) - the NCCL installer DaemonSets, the example jobs of every GPU
family with their multi-network annotations and sidecars, the TPU JobSet's Job templates - and the
custom resources against their CRD schema subsets (tests/support/gke_schema.py, kueue_schema.py)."""
from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import GCP_MIN
from tests.support.manifests import rendered_manifests, validate, worker_pod

VARIANTS = {
    "a3-high-tcpx": [{"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 4}],
    "a3-mega-tcpxo": [{"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 4, "capacity": "spot"}],
    "a3-ultra-rdma": [{"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 8,
                       "capacity": {"type": "reservation", "reservation_id": "a3u-res"}}],
    "a4-rdma-flex": [{"name": "gpu", "instance_type": "a4-highgpu-8g", "max_nodes": 2, "capacity": "flex-start"}],
    "a2-no-gpu-nics": [{"name": "gpu", "instance_type": "a2-ultragpu-8g", "max_nodes": 2}],
    "tpu-multislice": [{"name": "tpu", "tpu": {"type": "v6e", "topology": "8x8"}, "max_nodes": 32}],
    "gpu-and-tpu": [{"name": "h100", "instance_type": "h100", "max_nodes": 2},
                    {"name": "v5e", "tpu": {"type": "v5e", "topology": "4x8"}, "max_nodes": 8}],
}


def gke_files(plan_spec, pools, storage=True) -> dict:
    from aicluster.commands.planner import rendered_files

    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=pools)
    if storage:
        spec["storage"] = [{"name": "scratch", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000},
                           {"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 1024}]
    return rendered_files(plan_spec(spec))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_gke_manifest_validates(plan_spec, variant):
    manifests = rendered_manifests(gke_files(plan_spec, VARIANTS[variant]))
    kinds = {d["kind"] for docs in manifests.values() for d in docs}
    assert {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "ConfigMap", "ResourceFlavor",
            "ClusterQueue", "LocalQueue"} <= kinds
    if any("instance_type" in p for p in VARIANTS[variant]):
        assert {"JobSet", "PodDisruptionBudget"} <= kinds
    if any("tpu" in p for p in VARIANTS[variant]):
        assert "JobSet" in kinds
    if variant not in ("a2-no-gpu-nics", "tpu-multislice"):
        assert {"GKENetworkParamSet", "Network", "DaemonSet"} <= kinds
    for name, docs in manifests.items():
        for doc in docs:
            try:
                validate(doc)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
                pytest.fail(f"{variant} {name}: {doc['kind']} {doc['metadata'].get('name')}: {exc}")


@pytest.fixture(scope="module")
def rdma_docs():
    from tests.support import run_spec
    from aicluster.commands.planner import rendered_files

    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=VARIANTS["gpu-and-tpu"] + VARIANTS["a3-ultra-rdma"])
    files = rendered_files(run_spec(spec))
    return {name: [d for d in yaml.safe_load_all(text) if d] for name, text in files.items()
            if name.endswith(".yaml") and not name.startswith("k8s/helm/")}


@pytest.mark.parametrize("file, kind, mutate, error", [
    ("k8s/cluster/gkenetworkparamset-rdma-0.yaml", "GKENetworkParamSet",
     lambda d: d["spec"].update(deviceMode="Rdma"), "Rdma"),
    ("k8s/cluster/gkenetworkparamset-rdma-0.yaml", "GKENetworkParamSet",
     lambda d: d["spec"].update(vpcSubnetwork="x"), "vpcSubnetwork"),
    ("k8s/cluster/network-rdma-0.yaml", "Network", lambda d: d["spec"].update(type="RDMA"), "RDMA"),
    ("k8s/examples/train-v5e.yaml", "JobSet", lambda d: d["spec"].update(replicatedJob=[]), "replicatedJob"),
    ("k8s/examples/train-v5e.yaml", "JobSet",
     lambda d: d["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism="8"), "parallelism"),
    ("k8s/kube-system/daemonset-nccl-rdma-installer.yaml", "DaemonSet",
     lambda d: d["spec"]["template"]["spec"].update(hostNetwork="true"), "hostNetwork"),
    ("k8s/examples/train-h100.yaml", "JobSet",
     lambda d: worker_pod(d)["spec"]["initContainers"][0].update(restartPolicy=True), "restartPolicy"),
])
def test_validation_catches_broken_gke_objects(rdma_docs, file, kind, mutate, error):
    doc = copy.deepcopy(next(d for d in rdma_docs[file] if d["kind"] == kind))
    validate(doc)
    mutate(doc)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)) as info:
        validate(doc)
    assert error in str(info.value)


def test_example_tpu_script_compiles():
    from aicluster.render.templates import static

    compile(static("k8s/tpu_allreduce.py"), "tpu_allreduce.py", "exec")
