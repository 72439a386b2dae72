"""Metrics on Kubernetes, the same series as the Slurm nodes (catalog/observability.yaml, the one
list of exporters): the exporters EKS and GKE both run, and how each cloud collects them.

Objects, in namespace `monitoring` (telemetry_backend.COLLECTOR_NAMESPACE):
- dcgm-exporter: one DaemonSet per GPU pool, its counters file (the catalog's counters) in a
  ConfigMap. Per pool, as the health agent (k8s_health.py): the pod carries the pool's label, which
  both collectors copy into the `pool` target label the rules group by (a pod cannot see its
  node's labels, and GKE's managed collection cannot read them at all).
- node-exporter: one DaemonSet per pool and one on the system nodes (pool `system`), as the
  project's README runs it in a container: host network and PID namespaces, the host's root
  mounted read-only at /host (--path.rootfs), the infiniband collector (RDMA port counters) on.
- kube-state-metrics: one Deployment on the system nodes, exporting nodes only (node conditions
  and taints: the rules' kube_node_* series), with list/watch on nodes and nothing else.
- EKS: Prometheus in agent mode (scrape and remote-write only) as the ServiceAccount
  `aicluster-metrics`, which EKS Pod Identity maps to the role allowed aps:RemoteWrite on the
  cluster's AMP workspace (aws/observability.py CollectorIdentity); it scrapes the exporters and
  Kueue's metrics endpoint and remote-writes with SigV4.
- GKE: managed collection (gcp/observability.py) scrapes what PodMonitoring objects select (one
  per exporter); Cloud Monitoring evaluates the alert rules as PromQL alerting policies (the same
  backend as the GCP Slurm VMs), so nothing here evaluates rules.

Pure object builders (dicts, validated by the tests against the pinned schemas) and `metrics`,
which applies them through the cluster's provider.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import pulumi
import yaml

from aicluster.catalog import dump_yaml
from aicluster.catalog.observability import (Exporter, collector_image, counters_csv, exporters, scrape,
                                    textfile_directory)
from aicluster.kubernetes.health import STARTUP_TAINT_KEY, UNHEALTHY_TAINT_KEY
from aicluster.kubernetes.objects import builtin_resource
from aicluster.kubernetes.in_cluster import KubernetesObject
from aicluster.design.kubernetes import POOL_LABEL, SYSTEM_NODES, KubernetesPool, versions
from aicluster.design.telemetry_backend import COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT, amp_remote_write

NAMESPACE = COLLECTOR_NAMESPACE
APP_LABEL = "app.kubernetes.io/name"
DCGM = "dcgm-exporter"
NODE_EXPORTER = "node-exporter"
KSM = "kube-state-metrics"
AGENT = COLLECTOR_SERVICE_ACCOUNT      # the EKS collector: Deployment, ServiceAccount, config
# The `pool` label of the system nodes' series: no pool is called that (pool names have no "_").
SYSTEM_POOL = "system_nodes"
PORT_NAME = "metrics"
COUNTERS_FILE = "counters.csv"
COUNTERS_DIR = "/etc/dcgm-exporter"
AGENT_CONFIG_FILE = "prometheus.yml"
AGENT_CONFIG_DIR = "/etc/prometheus"
AGENT_DATA_DIR = "/prometheus"
# The kubelet's pod-resources socket: dcgm-exporter maps each GPU to the pod holding it (its
# deployment/values.yaml mounts this directory).
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
MONITORING_API = "monitoring.googleapis.com/v1"
SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"

# Small, fixed footprints: the exporters read counters, they do not compute.
EXPORTER_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
AGENT_RESOURCES = {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
NOBODY = 65534
# Every exporter and the collector run under the container runtime's default seccomp profile (pod
# level; a privileged container, GKE's dcgm-exporter, runs unconfined whatever it says: Kubernetes
# docs, "Seccomp and Kubernetes").
POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}}
LOCKED_DOWN = {"runAsNonRoot": True, "runAsUser": NOBODY, "allowPrivilegeEscalation": False,
               "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


@dataclass(frozen=True)
class MetricsSettings:
    """What differs between the clouds.

    platform: eks | gke (EKS: the Prometheus agent; GKE: PodMonitorings).
    region: the AMP workspace's region (SigV4 signing); EKS only.
    driver_dir: where the host keeps the NVIDIA driver when not on the standard paths (GKE:
        /home/kubernetes/bin/nvidia, mounted read-only at /usr/local/nvidia for dcgm-exporter).
    """
    platform: str
    region: str = ""
    driver_dir: str = ""


def _exporter(key: str) -> Exporter:
    return exporters()[key]


def labels(cluster: str, app: str) -> dict[str, str]:
    return {APP_LABEL: app, "aicluster-cluster": cluster}


def _meta(cluster: str, name: str, app: str, namespaced: bool = True) -> dict:
    meta = {"name": name, "labels": labels(cluster, app)}
    return {**meta, "namespace": NAMESPACE} if namespaced else meta


def namespace(cluster: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"aicluster-cluster": cluster}}}


def _tolerations(pool: KubernetesPool | None) -> list[dict]:
    """The pool's own taints (the GPU taint) and the health agent's: a node it marked unhealthy or
    not yet checked is exactly one whose counters must keep flowing."""
    own = [t.toleration() for t in pool.taints] if pool else [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    return own + [{"key": UNHEALTHY_TAINT_KEY, "operator": "Exists"}, {"key": STARTUP_TAINT_KEY, "operator": "Exists"}]


def daemon_set_name(app: str, pool: KubernetesPool | None) -> str:
    """<app>-<pool>, or <app> on the system nodes (never a pool's: that has a suffix)."""
    return f"{app}-{pool.name}" if pool else app


def _daemon_set(cluster: str, app: str, pool: KubernetesPool | None, node_selector: dict, tolerations: list[dict],
                pod_spec: dict) -> dict:
    pool_name = pool.name if pool else SYSTEM_POOL
    pod_labels = {APP_LABEL: app, POOL_LABEL: pool_name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {**_meta(cluster, daemon_set_name(app, pool), app),
                         "labels": labels(cluster, app) | {POOL_LABEL: pool_name}},
            "spec": {"selector": {"matchLabels": pod_labels},
                     "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": pod_labels},
                                  "spec": {"nodeSelector": node_selector, "tolerations": tolerations,
                                           # Kept under node pressure: they are how a sick node is seen.
                                           "priorityClassName": "system-node-critical",
                                           "securityContext": POD_SECURITY,
                                           "automountServiceAccountToken": False, **pod_spec}}}}


def dcgm_config_map(cluster: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cluster, f"{DCGM}-counters", DCGM),
            "data": {COUNTERS_FILE: counters_csv()}}


def dcgm_daemon_set(cluster: str, pool: KubernetesPool, settings: MetricsSettings) -> dict:
    e = _exporter("dcgm_exporter")
    mounts = [{"name": "counters", "mountPath": COUNTERS_DIR, "readOnly": True},
              {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True}]
    volumes = [{"name": "counters", "configMap": {"name": f"{DCGM}-counters"}},
               {"name": "pod-resources", "hostPath": {"path": POD_RESOURCES_DIR, "type": "Directory"}}]
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
           {"name": "DCGM_EXPORTER_LISTEN", "value": f":{e.port}"}]
    security = {"runAsNonRoot": False, "runAsUser": 0, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                # The profiling fields (DCGM_FI_PROF_*) need CAP_SYS_ADMIN: the chart's own securityContext.
                "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}
    if settings.driver_dir:
        # GKE: no container runtime hook hands the GPUs to a pod that requests none, so the exporter
        # opens /dev/nvidia* itself, which takes a privileged container.
        security = {"privileged": True, "readOnlyRootFilesystem": True}
        mounts.append({"name": "nvidia-driver", "mountPath": "/usr/local/nvidia", "readOnly": True})
        volumes.append({"name": "nvidia-driver", "hostPath": {"path": settings.driver_dir, "type": "Directory"}})
        env.append({"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"})
    container = {
        "name": DCGM, "image": e.image, "args": ["-f", f"{COUNTERS_DIR}/{COUNTERS_FILE}"], "env": env,
        "ports": [{"name": PORT_NAME, "containerPort": e.port, "protocol": "TCP"}],
        "securityContext": security,
        "readinessProbe": {"httpGet": {"path": "/health", "port": e.port}, "periodSeconds": 10},
        # The chart's own liveness probe (deployment/templates/daemonset.yaml: /health on the metrics
        # port); DCGM takes a while to attach to the GPUs (the chart waits 45 s).
        "livenessProbe": {"httpGet": {"path": "/health", "port": e.port}, "initialDelaySeconds": 45,
                          "periodSeconds": 15, "failureThreshold": 3},
        "resources": EXPORTER_RESOURCES, "volumeMounts": mounts}
    return _daemon_set(cluster, DCGM, pool, {POOL_LABEL: pool.name}, _tolerations(pool),
                       {"containers": [container], "volumes": volumes})


def node_exporter_daemon_set(cluster: str, pool: KubernetesPool | None) -> dict:
    """`pool` None: the system nodes."""
    e = _exporter("node_exporter")
    textfile = "/host" + textfile_directory()     # the one path the Slurm nodes' writers use too
    container = {
        "name": NODE_EXPORTER, "image": e.image,
        "args": ["--path.rootfs=/host", f"--web.listen-address=:{e.port}", "--collector.infiniband",
                 f"--collector.textfile.directory={textfile}"],
        # Host network: the port is the node's (hostPort must equal containerPort there).
        "ports": [{"name": PORT_NAME, "containerPort": e.port, "hostPort": e.port, "protocol": "TCP"}],
        "securityContext": LOCKED_DOWN,
        "readinessProbe": {"httpGet": {"path": "/", "port": e.port}, "periodSeconds": 10},
        # node_exporter serves its landing page at / from the same HTTP server as /metrics.
        "livenessProbe": {"httpGet": {"path": "/", "port": e.port}, "periodSeconds": 30, "failureThreshold": 3},
        "resources": EXPORTER_RESOURCES,
        "volumeMounts": [{"name": "root", "mountPath": "/host", "readOnly": True, "mountPropagation": "HostToContainer"}]}
    selector = {POOL_LABEL: pool.name} if pool else dict(SYSTEM_NODES)
    return _daemon_set(cluster, NODE_EXPORTER, pool, selector, _tolerations(pool),
                       {"hostNetwork": True, "hostPID": True, "dnsPolicy": "ClusterFirstWithHostNet",
                        "containers": [container],
                        "volumes": [{"name": "root", "hostPath": {"path": "/", "type": "Directory"}}]})


def _identity(cluster: str, name: str, app: str, rules: list[dict]) -> list[dict]:
    """ServiceAccount, ClusterRole (exactly `rules`) and its binding."""
    role = name if name.startswith("aicluster-") else f"aicluster-{name}"
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(cluster, name, app)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": _meta(cluster, role, app, namespaced=False), "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": _meta(cluster, role, app, namespaced=False),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]}]


def _deployment(cluster: str, name: str, app: str, pod_spec: dict) -> dict:
    pod_labels = {APP_LABEL: app}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(cluster, name, app),
            "spec": {"replicas": 1, "selector": {"matchLabels": pod_labels},
                     "template": {"metadata": {"labels": pod_labels},
                                  "spec": {"serviceAccountName": name, "nodeSelector": dict(SYSTEM_NODES),
                                           "securityContext": POD_SECURITY,
                                           "tolerations": _tolerations(None), **pod_spec}}}}


def kube_state_metrics(cluster: str) -> list[dict]:
    """Nodes only (--resources=nodes): the rules read kube_node_status_condition and
    kube_node_spec_taint; list/watch on nodes is all it then needs."""
    e = _exporter("kube_state_metrics")
    container = {"name": KSM, "image": e.image,
                 "args": ["--resources=nodes", f"--port={e.port}", "--telemetry-port=8081"],
                 "ports": [{"name": PORT_NAME, "containerPort": e.port, "protocol": "TCP"}],
                 "securityContext": LOCKED_DOWN, "resources": EXPORTER_RESOURCES,
                 "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}, "periodSeconds": 10},
                 # /livez on the metrics port, /readyz on the telemetry port: the project's own
                 # examples/standard/deployment.yaml (v2.18.0 on).
                 "livenessProbe": {"httpGet": {"path": "/livez", "port": e.port}, "initialDelaySeconds": 5,
                                   "periodSeconds": 30, "failureThreshold": 3}}
    return [*_identity(cluster, KSM, KSM, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]),
            _deployment(cluster, KSM, KSM, {"containers": [container]})]


def exporter_objects(cluster: str, pools: Sequence[KubernetesPool], settings: MetricsSettings) -> list[dict]:
    """The exporters every Kubernetes cluster runs, in apply order (the namespace first)."""
    gpu = [p for p in pools if p.gpus > 0]
    return [namespace(cluster), *([dcgm_config_map(cluster)] if gpu else []),
            *(dcgm_daemon_set(cluster, p, settings) for p in gpu),
            *(node_exporter_daemon_set(cluster, p) for p in (None, *pools)),
            *kube_state_metrics(cluster)]


# ---------------------------------------------------------------- EKS: Prometheus agent


def kueue_namespace() -> str:
    return versions().charts["kueue"].namespace


def _target_labels(cluster: str, per_node: bool = True) -> list[dict]:
    """cluster, pool (the pod's pool label), node (the pod's node): the catalog's target_labels.
    kube-state-metrics (per_node False) gets `cluster` only: its series describe every node and
    carry their own `node` label, which a target label of the same name would push aside
    (exported_node) and the rules would no longer find."""
    own = [{"target_label": "cluster", "replacement": cluster}]
    if not per_node:
        return own
    return own + [{"source_labels": [f"__meta_kubernetes_pod_label_{_prom_name(POOL_LABEL)}"], "target_label": "pool"},
                  {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}]


def _prom_name(label: str) -> str:
    """A Kubernetes label as Prometheus's service discovery names it (non-alphanumerics to _)."""
    return "".join(c if c.isalnum() else "_" for c in label)


def _pod_job(cluster: str, job: str, namespace_: str, keep: list[dict], per_node: bool = True) -> dict:
    return {"job_name": job,
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace_]}}],
            "relabel_configs": [*keep, *_target_labels(cluster, per_node)]}


def _keep_app(app: str) -> list[dict]:
    return [{"source_labels": [f"__meta_kubernetes_pod_label_{_prom_name(APP_LABEL)}"], "regex": app, "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": PORT_NAME, "action": "keep"}]


def agent_config(cluster: str, remote_write_url: str, region: str) -> dict:
    s = scrape()
    jobs = [_pod_job(cluster, app, NAMESPACE, _keep_app(app), per_node=app != KSM) for app in (DCGM, NODE_EXPORTER, KSM)]
    # Kueue serves its metrics over HTTPS behind controller-runtime's authentication filter: the
    # agent's token (TokenReview) and `get` on /metrics (SubjectAccessReview). Its certificate is
    # the one Kueue's internal cert manager signs for its webhook Service, so it names no pod IP
    # and cannot be verified by address; the target is still reached only inside the cluster.
    kueue = _pod_job(cluster, "kueue", kueue_namespace(), per_node=False, keep=[
        {"source_labels": ["__meta_kubernetes_pod_label_" + _prom_name(APP_LABEL)], "regex": KUEUE_POD_LABELS[APP_LABEL],
         "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": str(_exporter("kueue").port),
         "action": "keep"}])
    kueue |= {"scheme": "https", "authorization": {"type": "Bearer", "credentials_file": SA_TOKEN},
              "tls_config": {"insecure_skip_verify": True}}
    return {"global": {"scrape_interval": f"{s.interval_s}s", "scrape_timeout": f"{s.timeout_s}s"},
            "scrape_configs": [*jobs, kueue],
            "remote_write": [amp_remote_write(remote_write_url, region)]}


def agent_config_yaml(cluster: str, remote_write_url: str, region: str) -> str:
    return dump_yaml(agent_config(cluster, remote_write_url, region), sort_keys=False)


def agent_objects(cluster: str, config_yaml: str | pulumi.Output) -> list[dict]:
    """The collector: its identity (pods and /metrics, read only), its config, the Deployment. One
    replica: an agent holds only a write-ahead log to resend, and a restart loses at most the
    samples scraped since the last successful send."""
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
             {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cluster, AGENT, AGENT),
              "data": {AGENT_CONFIG_FILE: config_yaml}}
    container = {"name": "prometheus", "image": collector_image(),
                 "args": ["--agent", f"--config.file={AGENT_CONFIG_DIR}/{AGENT_CONFIG_FILE}",
                          f"--storage.agent.path={AGENT_DATA_DIR}"],
                 "ports": [{"name": "web", "containerPort": 9090, "protocol": "TCP"}],
                 "securityContext": LOCKED_DOWN, "resources": AGENT_RESOURCES,
                 "readinessProbe": {"httpGet": {"path": "/-/ready", "port": 9090}, "periodSeconds": 10},
                 # Prometheus's management API: /-/healthy answers 200 while the server runs (agent
                 # mode too); /-/ready only once it serves.
                 "livenessProbe": {"httpGet": {"path": "/-/healthy", "port": 9090}, "initialDelaySeconds": 30,
                                   "periodSeconds": 30, "failureThreshold": 3},
                 "volumeMounts": [{"name": "config", "mountPath": AGENT_CONFIG_DIR, "readOnly": True},
                                  {"name": "data", "mountPath": AGENT_DATA_DIR}]}
    deployment = _deployment(cluster, AGENT, AGENT, {"containers": [container],
                                                     "volumes": [{"name": "config", "configMap": {"name": AGENT}},
                                                                 {"name": "data", "emptyDir": {}}]})
    # The agent reads its config at start only: a changed config (a new workspace URL) rolls the pod.
    digest = (config_yaml.apply(_sha256) if isinstance(config_yaml, pulumi.Output) else _sha256(config_yaml))
    deployment["spec"]["template"]["metadata"]["annotations"] = {CONFIG_DIGEST: digest}
    return [*_identity(cluster, AGENT, AGENT, rules), config, deployment]


CONFIG_DIGEST = "aicluster.io/config-sha256"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- GKE: PodMonitoring


def pod_monitoring(cluster: str, app: str, namespace_: str, selector: dict, endpoint: dict,
                   per_node: bool = True) -> dict:
    """`cluster` is managed collection's own label; per node, `pool` from the pod and `node` its
    node, and nothing else: not `pod` and `container` (its default), which dcgm-exporter's own
    GPU-to-pod labels carry. Not per node (kube-state-metrics, Kueue): no target label at all, as
    in agent_config."""
    s = scrape()
    target = ({"fromPod": [{"from": POOL_LABEL, "to": "pool"}], "metadata": ["node"]} if per_node
              else {"metadata": []})
    return {"apiVersion": MONITORING_API, "kind": "PodMonitoring",
            "metadata": {"name": app, "namespace": namespace_, "labels": labels(cluster, app)},
            "spec": {"selector": {"matchLabels": selector},
                     "endpoints": [{"interval": f"{s.interval_s}s", "timeout": f"{s.timeout_s}s", **endpoint}],
                     "targetLabels": target}}


def pod_monitorings(cluster: str) -> list[dict]:
    return [pod_monitoring(cluster, app, NAMESPACE, {APP_LABEL: app}, {"port": PORT_NAME}, per_node=app != KSM)
            for app in (DCGM, NODE_EXPORTER, KSM)]


# Kueue's controller pods (the chart's kueue.selectorLabels) and its metrics port's name
# (charts/kueue/templates/manager/manager.yaml: containerPort 8443, name metrics).
KUEUE_POD_LABELS = {APP_LABEL: "kueue"}
KUEUE_READER = "aicluster-kueue-metrics"
# Managed collection's collectors run as this ServiceAccount (GKE: gmp-system/collector); they
# read a scrape's credentials from a Secret beside the PodMonitoring, if allowed to.
GMP_COLLECTOR = {"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}


def kueue_pod_monitoring(cluster: str) -> list[dict]:
    """Kueue's metrics on GKE: HTTPS behind controller-runtime's authentication filter, so the scrape
    presents a token of a ServiceAccount allowed `get` on /metrics (a token Secret the collector
    may read, that one Secret only). The certificate is Kueue's self-signed one (see agent_config)."""
    ns = kueue_namespace()
    meta = {"namespace": ns, "labels": labels(cluster, "kueue")}
    reader = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": KUEUE_READER, "labels": labels(cluster, "kueue")},
              "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": KUEUE_READER, **meta}},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": KUEUE_READER, **meta, "annotations": {"kubernetes.io/service-account.name": KUEUE_READER}}},
        reader,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": KUEUE_READER, "labels": labels(cluster, "kueue")},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": KUEUE_READER},
         "subjects": [{"kind": "ServiceAccount", "name": KUEUE_READER, "namespace": ns}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": f"{KUEUE_READER}-token", **meta},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [KUEUE_READER],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{KUEUE_READER}-token", **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{KUEUE_READER}-token"},
         "subjects": [GMP_COLLECTOR]},
        pod_monitoring(cluster, "kueue", ns, KUEUE_POD_LABELS, {
            "port": PORT_NAME, "scheme": "https", "tls": {"insecureSkipVerify": True},
            "authorization": {"type": "Bearer", "credentials": {"secret": {"name": KUEUE_READER, "key": "token"}}}},
            per_node=False),
    ]


def metrics_objects(cluster: str, pools: Sequence[KubernetesPool], settings: MetricsSettings,
                    remote_write_url: str | pulumi.Output | None = None) -> list[dict]:
    """Every object of a cluster's metrics, in apply order. EKS without a remote-write URL: the
    exporters only (no collector to send with)."""
    objects = exporter_objects(cluster, pools, settings)
    if settings.platform == "eks":
        if not remote_write_url:
            return objects
        config = (pulumi.Output.from_input(remote_write_url).apply(lambda url: agent_config_yaml(cluster, url, settings.region))
                  if isinstance(remote_write_url, pulumi.Output) else agent_config_yaml(cluster, remote_write_url, settings.region))
        return objects + agent_objects(cluster, config)
    return objects + pod_monitorings(cluster) + kueue_pod_monitoring(cluster)


def metrics(name: str, cluster: str, pools: Sequence[KubernetesPool], settings: MetricsSettings,
            opts: pulumi.ResourceOptions, remote_write_url: pulumi.Input[str] | None = None,
            kueue: Sequence[pulumi.Resource] = ()) -> None:
    """Apply the objects; everything waits for the namespace, the workloads for their identity and
    files, what lives in Kueue's namespace for Kueue's release (`kueue`, which makes it)."""
    before: list[pulumi.Resource] = []
    ns = None
    for doc in metrics_objects(cluster, pools, settings, remote_write_url):
        kind = doc["kind"]
        after = [ns] if ns is not None else []
        if doc["metadata"].get("namespace") == kueue_namespace():
            after = list(kueue)
        if kind in ("DaemonSet", "Deployment"):
            after = after + before
        resource = _resource(f"{name}-{kind.lower()}-{doc['metadata']['name']}", doc,
                             pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)))
        if kind == "Namespace":
            ns = resource
        elif kind not in ("DaemonSet", "Deployment", "PodMonitoring") \
                and doc["metadata"].get("namespace") != kueue_namespace():
            before.append(resource)


def _resource(name: str, doc: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """GMP's custom resources as written (KubernetesObject), the built-in kinds typed."""
    if doc["kind"] in ("PodMonitoring", "ClusterRules"):
        return KubernetesObject(name, doc, opts)
    return builtin_resource(name, doc, opts)
