"""The add-ons aicluster itself runs in every Kubernetes cluster (the objects it renders and applies,
not the Helm charts' own, not the example jobs): the GPU node health agent, the metrics exporters and
collector, GKE's NCCL installers. Each image is pinned (a digest, or a tag that names a full release),
each pod runs the container runtime's default seccomp profile, and each long-running container has a
liveness probe that checks something the container really serves: an HTTP endpoint on a port it
declares, or the health agent's heartbeat check (tests/k8s/test_node_health_agent.py runs it).

Checked over every Kubernetes stack in stacks/ and GKE clusters of each GPU NIC stack (TCPX, TCPXO
with its pre-installation step, RDMA), all of which also validate against the pinned Kubernetes
schemas (tests/k8s/test_manifests.py, test_gke_manifests.py)."""
from __future__ import annotations

import copy
import re

import pytest
import yaml

from aicluster.kubernetes import health as k8s_health
from tests.support import GCP_MIN, STACK_NAMES, stack_spec
from tests.support.manifests import rendered_manifests, validate

KUBERNETES_STACKS = [s for s in STACK_NAMES if stack_spec(s).get("scheduler") == "kubernetes"]
# GKE clusters whose NCCL installer differs: TCPX, TCPXO (with the nsenter pre-installation), RDMA.
GKE_NIC_STACKS = {
    "tcpx": [{"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 2}],
    "tcpxo": [{"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 2}],
    "rdma": [{"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 2}],
}
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet", "Job", "CronJob")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# A tag that names one release: major.minor.patch, optionally v-prefixed and suffixed
# (v2.20.0, 4.5.3-4.8.2-distroless, v1.1.0). Not `latest`, not a bare major or major.minor line
# (python:3.12-slim, ubuntu:24.04), which the publisher moves to every rebuild.
RELEASE_TAG = re.compile(r"^v?\d+\.\d+\.\d+([-.+_][\w.-]+)?$")
# Containers with nothing to probe: the pause container only sleeps (the installer's real work is
# its init containers); the kubelet restarts it if it ever exits.
NOTHING_TO_PROBE = {"pause"}


def _files(stack: str) -> dict[str, str]:
    from tests.support.stack_plans import stack_result

    return stack_result(stack).files


def _gke_files(pools: list[dict]) -> dict[str, str]:
    from aicluster.commands.planner import rendered_files
    from tests.support import run_spec

    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=pools)
    return rendered_files(run_spec(spec))


@pytest.fixture(scope="module")
def addons() -> dict[str, list[tuple[str, dict]]]:
    """Cluster -> (file, workload) of every add-on workload it applies (examples left out)."""
    clusters = {s: _files(s) for s in KUBERNETES_STACKS} | {f"gke-{k}": _gke_files(p) for k, p in GKE_NIC_STACKS.items()}
    out = {}
    for cluster, files in clusters.items():
        out[cluster] = [(name, doc) for name, docs in rendered_manifests(files).items()
                        if not name.startswith("k8s/examples/") for doc in docs if doc["kind"] in WORKLOADS]
    return out


def pod_spec(doc: dict) -> dict:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def containers(doc: dict, init: bool = True) -> list[dict]:
    pod = pod_spec(doc)
    return (pod.get("initContainers", []) if init else []) + pod.get("containers", [])


def is_pinned(image: str) -> bool:
    if DIGEST.search(image):
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and bool(RELEASE_TAG.match(tag))


@pytest.mark.parametrize("image, pinned", [
    ("python:3.12-slim", False), ("ubuntu:24.04", False), ("busybox", False), ("nginx:latest", False),
    ("registry.local:5000/agent", False), ("quay.io/prometheus/prometheus:v3", False),
    ("python:3.12-slim@sha256:" + "ab" * 32, True), ("quay.io/prometheus/node-exporter:v1.12.1", True),
    ("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless", True), ("registry.local:5000/agent:1.2.3", True),
])
def test_the_pin_rule_tells_floating_tags_from_releases_and_digests(image, pinned):
    assert is_pinned(image) is pinned


def test_every_cluster_kind_runs_the_addons_checked_here(addons):
    """The checks below see the agent, the exporters, the collector and every NCCL installer."""
    names = {doc["metadata"]["name"] for docs in addons.values() for _, doc in docs}
    assert {"dcgm-exporter-gpu", "node-exporter", "kube-state-metrics", "aicluster-metrics",
            f"{k8s_health.NAME}-gpu", "nccl-tcpx-installer", "nccl-tcpxo-installer", "nccl-rdma-installer"} <= names
    tcpxo = next(doc for _, doc in addons["gke-tcpxo"] if doc["metadata"]["name"] == "nccl-tcpxo-installer")
    assert [c["name"] for c in pod_spec(tcpxo)["initContainers"]][0] == "pre-installation"


def test_every_addon_image_is_pinned_by_digest_or_release(addons):
    """The node health agent (privileged, host PID, kube-system, on every GPU node) above all: an
    image that moves under a tag would run new code as root on every GPU node at its next restart."""
    floating = sorted({f"{cluster} {doc['kind']} {doc['metadata']['name']} {c['name']}: {c['image']}"
                       for cluster, docs in addons.items() for _, doc in docs for c in containers(doc)
                       if not is_pinned(c["image"])})
    assert not floating, "\n".join(floating)


def test_helm_releases_pin_their_chart_and_override_no_image_with_a_floating_tag(addons):
    """The charts' own images follow the chart version, which is exact (no range)."""
    for stack in KUBERNETES_STACKS:
        for name, text in _files(stack).items():
            if not name.startswith("k8s/helm/"):
                continue
            release = yaml.safe_load(text)
            assert re.fullmatch(r"v?\d+\.\d+\.\d+", str(release["version"])), (stack, name, release["version"])
            for key, value in _walk(release.get("values") or {}):
                if key in ("image", "tag") and isinstance(value, str):
                    assert is_pinned(value) or RELEASE_TAG.match(value), (stack, name, key, value)


def _walk(value, key=None):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def test_every_addon_pod_runs_the_runtime_default_seccomp_profile(addons):
    unconfined = []
    for cluster, docs in addons.items():
        for _, doc in docs:
            pod = pod_spec(doc)
            if (pod.get("securityContext") or {}).get("seccompProfile") != {"type": "RuntimeDefault"}:
                unconfined.append(f"{cluster} {doc['kind']} {doc['metadata']['name']}")
            for c in containers(doc):       # no container opts out
                profile = (c.get("securityContext") or {}).get("seccompProfile")
                if profile and profile.get("type") == "Unconfined":
                    unconfined.append(f"{cluster} {doc['metadata']['name']} {c['name']}")
    assert not unconfined, "\n".join(unconfined)


def test_every_long_running_addon_container_has_a_liveness_probe_on_what_it_serves(addons):
    problems = []
    for cluster, docs in addons.items():
        for _, doc in docs:
            for c in containers(doc, init=False):
                where = f"{cluster} {doc['metadata']['name']} {c['name']}"
                probe = c.get("livenessProbe")
                if c["name"] in NOTHING_TO_PROBE:
                    continue
                if not probe:
                    problems.append(f"{where}: no livenessProbe")
                elif "httpGet" in probe:
                    ports = {p["containerPort"] for p in c.get("ports", [])} | {p.get("name") for p in c.get("ports", [])}
                    if probe["httpGet"]["port"] not in ports:
                        problems.append(f"{where}: probes port {probe['httpGet']['port']}, which it does not declare")
                elif "exec" in probe:
                    if probe["exec"]["command"][1:3] != [f"{k8s_health.MOUNT_DIR}/{k8s_health.AGENT_FILE}", "--alive"]:
                        problems.append(f"{where}: an exec probe that is not the health agent's heartbeat check")
                else:
                    problems.append(f"{where}: a probe that checks nothing the container serves: {probe}")
    assert not problems, "\n".join(problems)


def test_kube_state_metrics_probes_livez_on_its_metrics_port_and_readyz_on_telemetry(addons):
    """kube-state-metrics serves /livez on the metrics port and /readyz on the telemetry port (8081:
    --telemetry-port), as its own examples/standard/deployment.yaml probes them."""
    ksm = next(doc for _, doc in addons["aws-p5-eks"] if doc["metadata"]["name"] == "kube-state-metrics")
    (c,) = containers(ksm)
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": c["ports"][0]["containerPort"]}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}
    assert "--telemetry-port=8081" in c["args"]


def test_the_hardened_addons_still_validate(addons):
    for cluster, docs in addons.items():
        for name, doc in docs:
            validate(doc)
