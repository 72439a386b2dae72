"""GPU node health on Kubernetes, the same on EKS and GKE: the agent DaemonSet that runs the Slurm
nodes' health check on every GPU node and marks the node (aicluster/node/health_agent.py),
its least-privilege identity, and the repair limits the EKS node groups share.

Objects (kube-system, all named aicluster-node-health...):
- ConfigMap: the check itself (aicluster/node/bin/aicluster-gpu-healthcheck, the very file the Slurm
  nodes install), the agent, and per GPU pool the check's expectations (`<pool>.env`).
- ServiceAccount + ClusterRole + ClusterRoleBinding: nodes get/list/patch and nodes/status patch,
  nothing else (no wildcard; the agent reads no secret, runs no pod).
- ValidatingAdmissionPolicy + binding: RBAC cannot name "the node this pod runs on", so the policy
  refuses any node change by the agent's service account to a node other than the one its token
  was issued on (the token's `authentication.kubernetes.io/node-name`, Kubernetes 1.32+ GA).
- One DaemonSet per GPU pool (the pool's expectations differ), on the pool's nodes, tolerating
  every taint (it must run on a node it tainted, to clear the taint once the node passes again).

The example jobs require nodes labelled `aicluster.io/gpu-health=passed` (HEALTH_LABEL In
[HEALTH_PASSED], templates/k8s/train-job.yaml.j2): a new node takes a job only after its first
passing check, and a failed one never.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import pulumi

from aicluster.kubernetes.objects import builtin_resource
from aicluster.design.kubernetes import POOL_LABEL, KubernetesPool
from aicluster.render.node_programs import module_source, program_text


NAME = "aicluster-node-health"
NAMESPACE = "kube-system"
# The agent (aicluster.node.health_agent: the standard library only) runs as this one file in the pod.
AGENT_FILE = "aicluster_node_health.py"
CHECK_FILE = "aicluster-gpu-healthcheck"
MOUNT_DIR = "/opt/aicluster-health"
APP_LABEL = "app.kubernetes.io/name"

# The scheme the agent sets (the agent's own constants; a test keeps the two equal).
CONDITION = "AiclusterGpuHealthy"
HEALTH_LABEL = "aicluster.io/gpu-health"
UNHEALTHY_TAINT_KEY = "aicluster.io/gpu-unhealthy"
HEALTH_PASSED = "passed"          # the label's value on a node whose last verdict was a pass
# The taint a node launched for a waiting job starts with (Karpenter's startupTaints, a scaling GKE
# node pool's taints: aicluster.kubernetes.capacity): no verdict yet; the agent's first check removes it.
# The cluster autoscaler leaves this prefix out of its node templates, as Karpenter does startup taints.
STARTUP_TAINT_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/aicluster-gpu-unchecked"

# Seconds between checks. The check takes a few seconds (each command is bounded, about 25 s at
# worst), reads only nvidia-smi, the kernel log and sysfs, and never touches a GPU a job holds.
CHECK_INTERVAL_S = 60

# Repair caps, one number for both clouds.
# - At most one node of a pool is repaired at a time: a pool's nodes are one gang's nodes, the job
#   restarts from its checkpoint once per repair wave anyway, and the EKS node groups already
#   replace nodes a budget at a time on updates (update_config max_unavailable, pools[].max_unavailable).
REPAIR_PARALLEL_NODES = 1
# - Repairs stop when more than 20% of a node group is unhealthy: that is a fault outside the nodes
#   (a bad AMI or driver, the fabric), which replacing nodes does not fix. 20% is EKS's own default
#   for managed node groups ("the node group has more than five nodes and more than 20% of the nodes
#   in the node group are unhealthy": Amazon EKS User Guide, node-repair), set here explicitly.
REPAIR_MAX_UNHEALTHY_PERCENT = 20
# How long a node stays failed before the agent stops its kubelet (NotReady), the signal both
# clouds' auto repair act on. GKE: its repair criteria are NotReady for about 10 minutes, a node
# reporting no status, or a full boot disk (GKE docs, node-auto-repair: "Repair criteria"); nothing
# else repairs a GKE GPU node, so the agent waits as long as EKS waits on AcceleratedHardwareReady
# (10 min, EKS node-repair table). EKS: the node monitoring agent's AcceleratedHardwareReady already
# repairs the Xid/NVLink/DCGM faults after 10 minutes; the agent's own path backs it for what that
# agent does not see (a GPU or an EFA device missing without an Xid) after 30 minutes, EKS's wait
# for its other node conditions.
REPAIR_AFTER_S = {"eks": 30 * 60, "gke": 10 * 60}

RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}

# Liveness: the agent writes the time to HEARTBEAT_FILE each time round its loop (a memory-backed
# emptyDir: the root filesystem is read-only); the probe runs the agent's own `--alive` check, which
# fails when the heartbeat is older than HEARTBEAT_MAX_AGE_S. One time round takes at most about
# 5 minutes with every call at its own limit (the agent's LOOP_WORST_S: the check's 120 s, four API
# calls of 30 s, stopping the kubelet 60 s) plus CHECK_INTERVAL_S asleep; past 10 minutes the loop is
# stuck, and a restart (state comes back from the Node: initial_state) is the cure.
HEARTBEAT_DIR = "/run/aicluster-health"
HEARTBEAT_FILE = f"{HEARTBEAT_DIR}/heartbeat"
HEARTBEAT_MAX_AGE_S = 10 * 60
PROBE_PERIOD_S = 60
# python3 starts and reads one file: well inside this, also on a busy node.
PROBE_TIMEOUT_S = 15


@dataclass(frozen=True)
class NodeHealthSettings:
    """What differs between the clouds.

    platform: eks | gke (picks REPAIR_AFTER_S).
    image: the agent's image (python with nsenter; catalog images `node-health`).
    expectations: pool name -> the check's env file (AICLUSTER_GPUS, AICLUSTER_FABRIC_KIND,
        AICLUSTER_FABRIC_DEVICES; NVL72 pools: AICLUSTER_NVLINK_DOMAIN_NODES, AICLUSTER_IMEX), one
        per GPU pool.
    host_path, host_ld_library_path: where the host keeps nvidia-smi and its libraries when they are
        not on the standard path (GKE installs the driver under /home/kubernetes/bin/nvidia).
    taint_only: pools whose NotReady nodes nothing repairs (GKE flex-start pools run without
        auto-repair): the agent taints a failed node there but never stops its kubelet.
    """
    platform: str
    image: str
    expectations: Mapping[str, str]
    host_path: str = ""
    host_ld_library_path: str = ""
    taint_only: frozenset[str] = frozenset()

    def repair_after_s(self, pool: str) -> int:
        """0: never stop the kubelet."""
        return 0 if pool in self.taint_only else REPAIR_AFTER_S[self.platform]


def expectations(gpus: int, fabric_kind: str, fabric_devices: int, nvlink_domain_nodes: int = 1) -> str:
    """A pool's env file, as the check reads it (KEY=VALUE lines, parsed, never sourced). A pool of a
    multi-node NVLink domain (PoolDesign.nvlink_domain_nodes > 1) adds the domain checks, with IMEX
    as the NVIDIA DRA driver runs it (AICLUSTER_IMEX=dra: per ComputeDomain, the host service off)."""
    text = f"AICLUSTER_GPUS={gpus}\nAICLUSTER_FABRIC_KIND={fabric_kind}\nAICLUSTER_FABRIC_DEVICES={fabric_devices}\n"
    if nvlink_domain_nodes > 1:
        text += f"AICLUSTER_NVLINK_DOMAIN_NODES={nvlink_domain_nodes}\nAICLUSTER_IMEX=dra\n"
    return text


def gpu_pools(pools: Sequence[KubernetesPool]) -> list[KubernetesPool]:
    return [p for p in pools if p.gpus > 0]


def labels(cluster: str) -> dict[str, str]:
    return {APP_LABEL: NAME, "aicluster-cluster": cluster}


def config_map(cluster: str, settings: NodeHealthSettings) -> dict:
    data = {CHECK_FILE: program_text(CHECK_FILE), AGENT_FILE: module_source("health_agent")}
    data |= {f"{pool}.env": text for pool, text in sorted(settings.expectations.items())}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels(cluster)}, "data": data}


def service_account(cluster: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels(cluster)}}


def cluster_role(cluster: str) -> dict:
    """Read nodes (its own, and its pool's for the repair cap), patch labels and taints, patch the
    status condition. Nothing else."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels(cluster)},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
                      {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]}


def cluster_role_binding(cluster: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels(cluster)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}


NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def own_node_policy(cluster: str) -> dict:
    """Only the node the agent's pod runs on: a bound service account token carries the node's name
    in the user's extra (ServiceAccountTokenPodNodeInfo, GA in Kubernetes 1.32)."""
    user = f"system:serviceaccount:{NAMESPACE}:{NAME}"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": f"{NAME}-own-node", "labels": labels(cluster)},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{
                         "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                         "resources": ["nodes", "nodes/status"]}]},
                     "matchConditions": [{"name": "node-health-agent",
                                          "expression": f"request.userInfo.username == '{user}'"}],
                     "validations": [{
                         "expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                                       f"object.metadata.name in request.userInfo.extra['{NODE_NAME_EXTRA}']",
                         "message": "the GPU node health agent may change only the node it runs on"}]}}


def own_node_policy_binding(cluster: str) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": f"{NAME}-own-node", "labels": labels(cluster)},
            "spec": {"policyName": f"{NAME}-own-node", "validationActions": ["Deny"]}}


def daemon_set(cluster: str, pool: KubernetesPool, settings: NodeHealthSettings) -> dict:
    name = f"{NAME}-{pool.name}"
    pod_labels = {APP_LABEL: NAME, POOL_LABEL: pool.name}
    env = {"AICLUSTER_HEALTH_SCRIPT": f"{MOUNT_DIR}/{CHECK_FILE}",
           "AICLUSTER_HEALTH_ENV": f"{MOUNT_DIR}/{pool.name}.env",
           "AICLUSTER_HEALTH_INTERVAL": str(CHECK_INTERVAL_S),
           "AICLUSTER_REPAIR_AFTER": str(settings.repair_after_s(pool.name)),
           "AICLUSTER_REPAIR_CAP": str(REPAIR_PARALLEL_NODES),
           "AICLUSTER_POOL_SELECTOR": f"{POOL_LABEL}={pool.name}",
           "AICLUSTER_HOST_PATH": settings.host_path,
           "AICLUSTER_HOST_LD_LIBRARY_PATH": settings.host_ld_library_path,
           "AICLUSTER_HEARTBEAT": HEARTBEAT_FILE,
           "PYTHONDONTWRITEBYTECODE": "1"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels(cluster) | {POOL_LABEL: pool.name}},
            "spec": {
                "selector": {"matchLabels": pod_labels},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        # nsenter --target 1: the host's PID 1, for its mount and network namespaces.
                        "hostPID": True,
                        # Not evicted under node pressure: it is what tells a broken node apart.
                        "priorityClassName": "system-node-critical",
                        "nodeSelector": {POOL_LABEL: pool.name},
                        # Every taint, its own included: it clears the taint once the node passes.
                        "tolerations": [{"operator": "Exists"}],
                        # The container runtime's default seccomp profile for the pod. "Privileged
                        # containers always run as Unconfined" (Kubernetes docs, "Seccomp and
                        # Kubernetes"), so today it changes nothing for the agent; it is set so the
                        # pod is confined the moment the agent can drop `privileged`, and admission
                        # policies that require a profile accept it.
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "agent",
                            "image": settings.image,
                            "command": ["python3", f"{MOUNT_DIR}/{AGENT_FILE}"],
                            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
                                   + [{"name": k, "value": v} for k, v in env.items()],
                            # nsenter into the host's namespaces needs CAP_SYS_ADMIN and CAP_SYS_PTRACE
                            # over PID 1; the check runs the host's nvidia-smi, fi_info and journalctl.
                            "securityContext": {"privileged": True, "readOnlyRootFilesystem": True},
                            "resources": RESOURCES,
                            "livenessProbe": {
                                "exec": {"command": ["python3", f"{MOUNT_DIR}/{AGENT_FILE}", "--alive", HEARTBEAT_FILE,
                                                     str(HEARTBEAT_MAX_AGE_S)]},
                                "initialDelaySeconds": PROBE_PERIOD_S, "periodSeconds": PROBE_PERIOD_S,
                                "timeoutSeconds": PROBE_TIMEOUT_S, "failureThreshold": 2},
                            "volumeMounts": [{"name": "health", "mountPath": MOUNT_DIR, "readOnly": True},
                                             {"name": "heartbeat", "mountPath": HEARTBEAT_DIR}],
                        }],
                        "volumes": [{"name": "health", "configMap": {"name": NAME}},
                                    {"name": "heartbeat", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
                    }}}}


def node_health_objects(cluster: str, pools: Sequence[KubernetesPool], settings: NodeHealthSettings) -> list[dict]:
    """Every object of the agent, in apply order; none without a GPU pool."""
    gpu = gpu_pools(pools)
    if not gpu:
        return []
    return [config_map(cluster, settings), service_account(cluster), cluster_role(cluster),
            cluster_role_binding(cluster), own_node_policy(cluster), own_node_policy_binding(cluster),
            *(daemon_set(cluster, p, settings) for p in gpu)]


def node_health(name: str, cluster: str, pools: Sequence[KubernetesPool], settings: NodeHealthSettings,
                opts: pulumi.ResourceOptions) -> None:
    """Apply the agent's objects; the DaemonSets wait for the rest (their identity and files)."""
    before: list[pulumi.Resource] = []
    for doc in node_health_objects(cluster, pools, settings):
        own = opts if doc["kind"] != "DaemonSet" else pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=list(before)))
        resource = builtin_resource(f"{name}-{doc['kind'].lower()}-{doc['metadata']['name']}", doc, own)
        if doc["kind"] != "DaemonSet":
            before.append(resource)
