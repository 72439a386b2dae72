"""Metrics on Kubernetes (components/aicluster/kubernetes/metrics.py): the exporters of the one list
(catalog/observability.yaml) on EKS and GKE, every object valid (strict, CRDs included), the
scrape targets on the exporters' ports, the EKS collector's config accepted by promtool, the GKE
PodMonitorings selecting the exporters' pods."""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from aicluster.kubernetes import metrics as km
from aicluster.aws.observability import remote_write_url
from aicluster.catalog.observability import counters_csv, exporters, scrape
from aicluster.kubernetes.health import STARTUP_TAINT_KEY, UNHEALTHY_TAINT_KEY
from aicluster.design.kubernetes import GPU_TAINT, POOL_LABEL, versions
from aicluster.design.observability import monitoring_design
from tests.support import stack_spec
from tests.support.manifests import rendered_manifests, validate
from tests.support.prometheus import program

EKS, GKE = "aws-p5-eks", "gcp-a3ultra-gke"


@pytest.fixture(scope="module")
def plans():
    from tests.support.stack_plans import stack_result

    cache: dict = {}

    def get(stack: str):
        if stack not in cache:
            cache[stack] = stack_result(stack)
        return cache[stack]
    return get


def metrics_docs(plan) -> dict[tuple[str, str], dict]:
    """The metrics objects of a plan: everything in `monitoring`, their cluster-wide RBAC, the rules."""
    docs = [d for ds in rendered_manifests(plan.files).values() for d in ds]
    names = {f"aicluster-{km.KSM}", km.AGENT, km.KUEUE_READER, f"{km.KUEUE_READER}-token"}
    return {(d["kind"], d["metadata"]["name"]): d for d in docs
            if d["metadata"].get("namespace") == km.NAMESPACE or d["metadata"]["name"] in names
            or d["kind"] == "PodMonitoring"
            or (d["kind"] == "Namespace" and d["metadata"]["name"] == km.NAMESPACE)}


def gpu_pools(stack: str) -> set[str]:
    return {p["name"] for p in stack_spec(stack)["pools"] if "tpu" not in p}


def pools(stack: str) -> set[str]:
    return {p["name"] for p in stack_spec(stack)["pools"]}


def exporter_set(stack: str) -> set[tuple[str, str]]:
    return ({("Namespace", km.NAMESPACE), ("ConfigMap", f"{km.DCGM}-counters")}
            | {("DaemonSet", f"{km.DCGM}-{p}") for p in gpu_pools(stack)}
            | {("DaemonSet", f"{km.NODE_EXPORTER}-{p}") for p in pools(stack)} | {("DaemonSet", km.NODE_EXPORTER)}
            | {(k, km.KSM) for k in ("ServiceAccount", "Deployment")}
            | {(k, f"aicluster-{km.KSM}") for k in ("ClusterRole", "ClusterRoleBinding")})


def test_eks_runs_the_exporters_and_the_agent_and_every_object_validates(plans):
    ours = metrics_docs(plans(EKS))
    assert set(ours) == exporter_set(EKS) | {(k, km.AGENT) for k in (
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment")}
    for doc in ours.values():
        validate(doc)


def test_gke_runs_the_exporters_and_pod_monitorings_and_every_object_validates(plans):
    ours = metrics_docs(plans(GKE))
    assert set(ours) == exporter_set(GKE) | {("PodMonitoring", a) for a in (km.DCGM, km.NODE_EXPORTER, km.KSM, "kueue")} \
        | {(k, km.KUEUE_READER) for k in ("ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding")} \
        | {(k, f"{km.KUEUE_READER}-token") for k in ("Role", "RoleBinding")}
    for doc in ours.values():
        validate(doc)


def _daemon_set(plan, app: str, pool: str | None) -> dict:
    """The DaemonSet of a pool, or of the system nodes (None)."""
    return metrics_docs(plan)[("DaemonSet", f"{app}-{pool}" if pool else app)]


@pytest.mark.parametrize("mistake", [
    pytest.param(lambda d: d["spec"]["template"]["spec"].update(hostNetwrk=True), id="misspelled-pod-field"),
    pytest.param(lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(containerPort="9100"),
                 id="port-as-string"),
    pytest.param(lambda d: d["spec"].pop("selector"), id="no-selector"),
])
def test_a_broken_daemon_set_fails_validation(plans, mistake):
    doc = copy.deepcopy(_daemon_set(plans(EKS), km.NODE_EXPORTER, None))
    validate(doc)
    mistake(doc)
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(doc)


@pytest.mark.parametrize("mistake", [
    pytest.param(lambda d: d["spec"]["targetLabels"].update(metadata=["pool"]), id="metadata-label-not-permitted"),
    pytest.param(lambda d: d["spec"]["endpoints"][0].update(intervall="30s"), id="misspelled-endpoint-field"),
    pytest.param(lambda d: d["metadata"].pop("namespace"), id="namespaced-without-namespace"),
])
def test_a_broken_pod_monitoring_fails_validation(plans, mistake):
    doc = copy.deepcopy(metrics_docs(plans(GKE))[("PodMonitoring", km.DCGM)])
    mistake(doc)
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(doc)


def _pods(ours: dict) -> list[tuple[str, dict]]:
    """(namespace, pod template) of every workload."""
    return [(d["metadata"]["namespace"], d["spec"]["template"]) for (kind, _), d in ours.items()
            if kind in ("DaemonSet", "Deployment")]


def _catalog_port(app: str) -> int:
    return exporters()[{km.DCGM: "dcgm_exporter", km.NODE_EXPORTER: "node_exporter",
                        km.KSM: "kube_state_metrics"}[app]].port


def test_the_pod_monitorings_select_the_exporters_pods_on_the_catalog_ports(plans):
    ours = metrics_docs(plans(GKE))
    for app in (km.DCGM, km.NODE_EXPORTER, km.KSM):
        pm = ours[("PodMonitoring", app)]
        want = pm["spec"]["selector"]["matchLabels"]
        selected = [t for ns, t in _pods(ours) if ns == pm["metadata"]["namespace"]
                    and want.items() <= t["metadata"]["labels"].items()]
        assert selected, f"PodMonitoring {app} selects no pod"
        for template in selected:
            ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
            assert ports[pm["spec"]["endpoints"][0]["port"]] == _catalog_port(app)
            # the `pool` target label comes from the pod's pool label
            assert (POOL_LABEL in template["metadata"]["labels"]) == (app != km.KSM)
        others = [t for ns, t in _pods(ours) if want.items() <= t["metadata"]["labels"].items()]
        assert len(others) == len(selected)


def test_every_dcgm_pod_carries_its_pool_and_reads_the_catalog_counters(plans):
    ours = metrics_docs(plans(EKS))
    assert ours[("ConfigMap", f"{km.DCGM}-counters")]["data"][km.COUNTERS_FILE] == counters_csv()
    for name in exporters()["dcgm_exporter"].counters:
        assert f"{name}," in counters_csv()
    for pool in gpu_pools(EKS):
        pod = _daemon_set(plans(EKS), km.DCGM, pool)["spec"]["template"]
        assert pod["metadata"]["labels"][POOL_LABEL] == pool
        assert pod["spec"]["nodeSelector"] == {POOL_LABEL: pool}
        container = pod["spec"]["containers"][0]
        assert container["image"] == exporters()["dcgm_exporter"].image
        assert container["args"] == ["-f", f"{km.COUNTERS_DIR}/{km.COUNTERS_FILE}"]


@pytest.mark.parametrize("stack", [EKS, GKE])
def test_gpu_exporters_tolerate_the_gpu_taint_and_the_health_agents_taints(plans, stack):
    for app in (km.DCGM, km.NODE_EXPORTER):
        for pool in gpu_pools(stack):
            tolerations = _daemon_set(plans(stack), app, pool)["spec"]["template"]["spec"]["tolerations"]
            keys = {t["key"] for t in tolerations}
            assert GPU_TAINT.toleration() in tolerations
            assert {UNHEALTHY_TAINT_KEY, STARTUP_TAINT_KEY} <= keys


def test_node_exporter_runs_as_its_readme_says_with_read_only_host_mounts(plans):
    for pool in [*pools(EKS), None]:
        spec = _daemon_set(plans(EKS), km.NODE_EXPORTER, pool)["spec"]["template"]["spec"]
        assert spec["hostNetwork"] and spec["hostPID"]
        (container,) = spec["containers"]
        assert "--path.rootfs=/host" in container["args"] and "--collector.infiniband" in container["args"]
        assert container["image"] == exporters()["node_exporter"].image
        assert all(m["readOnly"] for m in container["volumeMounts"])
        assert container["securityContext"]["readOnlyRootFilesystem"]
        assert not container["securityContext"].get("privileged")


def test_kube_state_metrics_exports_nodes_with_list_and_watch_on_nodes_only(plans):
    ours = metrics_docs(plans(EKS))
    assert ours[("ClusterRole", f"aicluster-{km.KSM}")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    (container,) = ours[("Deployment", km.KSM)]["spec"]["template"]["spec"]["containers"]
    assert "--resources=nodes" in container["args"]
    assert container["image"] == exporters()["kube_state_metrics"].image


def _agent_config(plan) -> dict:
    return yaml.safe_load(metrics_docs(plan)[("ConfigMap", km.AGENT)]["data"][km.AGENT_CONFIG_FILE])


def test_the_agent_remote_writes_to_the_amp_workspace_with_sigv4(plans):
    plan = plans(EKS)
    (workspace,) = [r for r in plan.plan.resources if r.type == "aws:amp/workspace:Workspace"]
    (write,) = _agent_config(plan)["remote_write"]
    assert write["url"] == remote_write_url(workspace.outputs["prometheusEndpoint"])
    assert write["sigv4"] == {"region": plan.design.region}
    deployment = metrics_docs(plan)[("Deployment", km.AGENT)]["spec"]["template"]["spec"]
    assert deployment["serviceAccountName"] == km.COLLECTOR_SERVICE_ACCOUNT
    config = metrics_docs(plan)[("ConfigMap", km.AGENT)]["data"][km.AGENT_CONFIG_FILE]
    annotations = metrics_docs(plan)[("Deployment", km.AGENT)]["spec"]["template"]["metadata"]["annotations"]
    assert annotations[km.CONFIG_DIGEST] == km._sha256(config)   # a new config rolls the agent
    assert "--agent" in deployment["containers"][0]["args"]


def _pod_target(job: dict, namespace: str, pod_labels: dict, port_name: str, port: int) -> bool:
    """Whether a scrape job's keep rules keep a pod's port (the relabelling Prometheus applies)."""
    import re

    if namespace not in job["kubernetes_sd_configs"][0]["namespaces"]["names"]:
        return False
    meta = {f"__meta_kubernetes_pod_label_{km._prom_name(k)}": v for k, v in pod_labels.items()}
    meta |= {"__meta_kubernetes_pod_container_port_name": port_name,
             "__meta_kubernetes_pod_container_port_number": str(port)}
    return all(re.fullmatch(rule["regex"], ";".join(meta.get(s, "") for s in rule["source_labels"]))
               for rule in job["relabel_configs"] if rule.get("action") == "keep")


def test_the_agent_scrapes_each_exporter_on_its_catalog_port_and_kueue(plans):
    plan = plans(EKS)
    ours = metrics_docs(plan)
    jobs = {j["job_name"]: j for j in _agent_config(plan)["scrape_configs"]}
    assert set(jobs) == {km.DCGM, km.NODE_EXPORTER, km.KSM, "kueue"}
    for app in (km.DCGM, km.NODE_EXPORTER, km.KSM):
        for ns, template in _pods(ours):
            for c in template["spec"]["containers"]:
                for p in c.get("ports", []):
                    kept = _pod_target(jobs[app], ns, template["metadata"]["labels"], p["name"], p["containerPort"])
                    mine = template["metadata"]["labels"].get(km.APP_LABEL) == app and p["name"] == km.PORT_NAME
                    assert kept == mine, (app, template["metadata"]["labels"], p)
                    if kept:
                        assert p["containerPort"] == _catalog_port(app)
    kueue = jobs["kueue"]
    assert kueue["kubernetes_sd_configs"][0]["namespaces"]["names"] == [versions().charts["kueue"].namespace]
    kueue_ns = versions().charts["kueue"].namespace
    assert _pod_target(kueue, kueue_ns, km.KUEUE_POD_LABELS, "metrics", exporters()["kueue"].port)
    assert not _pod_target(kueue, kueue_ns, km.KUEUE_POD_LABELS, "webhook-server", 9443)
    assert not _pod_target(kueue, kueue_ns, {km.APP_LABEL: "jobset"}, "metrics", exporters()["kueue"].port)
    assert kueue["scheme"] == "https"
    rules = ours[("ClusterRole", km.AGENT)]["rules"]
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in rules


def _promtool_ready(config: dict, tmp_path: Path) -> Path:
    """The config as promtool can check it here: Debian's promtool is built without the Kubernetes
    service discovery (it rejects kubernetes_sd_configs as unknown), so each job's discovery is
    swapped for a file_sd one and the pod's token path for a file that exists; every other field
    (relabelling, authorization, TLS, remote_write with sigv4, queue settings) is checked as written."""
    token = tmp_path / "token"
    token.write_text("t")
    config = copy.deepcopy(config)
    for job in config["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
        job["file_sd_configs"] = [{"files": [str(tmp_path / f"{job['job_name']}.json")]}]
        (tmp_path / f"{job['job_name']}.json").write_text("[]")
        if "authorization" in job:
            assert job["authorization"]["credentials_file"] == km.SA_TOKEN
            job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _promtool(path: Path) -> subprocess.CompletedProcess:
    """promtool's own check of the config; a missing promtool fails the test (never skips):
    .ci/install-system-deps installs Debian's prometheus package."""
    return subprocess.run([program("promtool"), "check", "config", "--agent", str(path)], capture_output=True,
                          text=True, timeout=60)


def test_promtool_accepts_the_agent_config(plans, tmp_path):
    result = _promtool(_promtool_ready(_agent_config(plans(EKS)), tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("mistake", [
    pytest.param(lambda c: c["remote_write"][0]["sigv4"].update(regoin="x"), id="misspelled-sigv4-field"),
    pytest.param(lambda c: c["scrape_configs"][0]["relabel_configs"][0].update(action="kept"), id="bad-action"),
    pytest.param(lambda c: c["scrape_configs"].append(copy.deepcopy(c["scrape_configs"][0])), id="duplicate-job"),
])
def test_promtool_rejects_a_broken_agent_config(plans, tmp_path, mistake):
    config = _agent_config(plans(EKS))
    mistake(config)
    assert _promtool(_promtool_ready(config, tmp_path)).returncode != 0


def test_without_a_remote_write_url_eks_gets_the_exporters_and_no_collector():
    objects = km.metrics_objects("c", (), km.MetricsSettings("eks", region="us-east-1"))
    assert {d["kind"] for d in objects} == {"Namespace", "DaemonSet", "ServiceAccount", "ClusterRole",
                                            "ClusterRoleBinding", "Deployment"}
    assert all(d["metadata"]["name"] != km.AGENT for d in objects)


def test_gke_scrapes_kueue_with_a_token_only_the_collector_may_read(plans):
    ours = metrics_docs(plans(GKE))
    kueue_ns = versions().charts["kueue"].namespace
    pm = ours[("PodMonitoring", "kueue")]
    assert pm["metadata"]["namespace"] == kueue_ns
    (endpoint,) = pm["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["port"] == km.PORT_NAME
    secret = endpoint["authorization"]["credentials"]["secret"]
    token = ours[("Secret", secret["name"])]
    assert token["metadata"]["namespace"] == kueue_ns and token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == km.KUEUE_READER
    role = ours[("Role", f"{km.KUEUE_READER}-token")]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret["name"]],
                              "verbs": ["get", "list", "watch"]}]
    assert ours[("RoleBinding", f"{km.KUEUE_READER}-token")]["subjects"] == [
        {"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}]
    assert ours[("ClusterRole", km.KUEUE_READER)]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


@pytest.mark.parametrize("stack", [EKS, "aws-p5-slurm"])
def test_aws_loads_the_alert_rules_into_the_amp_workspace(plans, stack):
    """EKS's collector and the Slurm VMs' agents both write to the workspace, which evaluates the
    rules (Slurm's since its nodes ship: slurm_monitoring)."""
    from aicluster.render.alert_rules import rules_yaml

    plan = plans(stack)
    (workspace,) = [r for r in plan.plan.resources if r.type == "aws:amp/workspace:Workspace"]
    (rules,) = [r for r in plan.plan.resources if r.type == "aws:amp/ruleGroupNamespace:RuleGroupNamespace"]
    assert rules.inputs["workspaceId"] == workspace.id
    assert rules.inputs["data"] == rules_yaml(monitoring_design(plan.design))
    assert not rules.protect


def _target_label_names(job: dict) -> set[str]:
    return {r["target_label"] for r in job["relabel_configs"] if "target_label" in r}


def test_per_node_exporters_get_cluster_pool_node_and_kube_state_metrics_keeps_its_own_node_label(plans):
    jobs = {j["job_name"]: j for j in _agent_config(plans(EKS))["scrape_configs"]}
    assert set(scrape().target_labels) == {"cluster", "pool", "node"}
    for app in (km.DCGM, km.NODE_EXPORTER):
        assert _target_label_names(jobs[app]) == set(scrape().target_labels)
    # kube_node_* series name the node they describe in `node`: a target label would rename it.
    assert _target_label_names(jobs[km.KSM]) == _target_label_names(jobs["kueue"]) == {"cluster"}
    gke = metrics_docs(plans(GKE))
    assert gke[("PodMonitoring", km.DCGM)]["spec"]["targetLabels"] == {
        "fromPod": [{"from": POOL_LABEL, "to": "pool"}], "metadata": ["node"]}
    assert gke[("PodMonitoring", km.KSM)]["spec"]["targetLabels"] == {"metadata": []}


def test_a_pool_named_system_keeps_its_own_exporter_and_pool_label():
    from aicluster.design.kubernetes import KubernetesPool

    pool = KubernetesPool(name="system", instance_type="m7i.4xlarge", min_nodes=0, max_nodes=1, capacity_type="ON_DEMAND",
                          labels={}, taints=(), gpus=0, efa=0, vcpu=16, memory_gib=64, hugepages_per_node=0,
                          local_nvme=False, worker_cpu=15, worker_memory_gib=60, shm_gib=8)
    objects = km.exporter_objects("c", [pool], km.MetricsSettings("gke"))
    names = [d["metadata"]["name"] for d in objects if d["kind"] == "DaemonSet"]
    assert sorted(names) == [km.NODE_EXPORTER, f"{km.NODE_EXPORTER}-system"]
    pool_labels = {d["spec"]["template"]["metadata"]["labels"][POOL_LABEL] for d in objects if d["kind"] == "DaemonSet"}
    assert pool_labels == {"system", km.SYSTEM_POOL}
