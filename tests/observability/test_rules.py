"""The alert rules of every stack: promtool accepts them, every alert carries its threshold's
origin, and the thresholds are the plan's own numbers x the documented factors."""
from __future__ import annotations

import pytest
import yaml

from aicluster.render.alert_rules import GPU_UNHEALTHY_TAINT, RULES_FILE, alerts, rule_groups, rules_yaml
from aicluster.render.dashboards import DASHBOARD_DIR
from aicluster.design.cluster import design_cluster
from aicluster.kubernetes.health import UNHEALTHY_TAINT_KEY
from aicluster.design.observability import AlertFactors, monitoring_design
from aicluster.spec.cluster import parse_spec
from tests.support import STACK_NAMES, stack_spec
from tests.support.prometheus import check_rules
from tests.support.stack_plans import stack_result


def _watch(name: str, **kw):
    return monitoring_design(design_cluster(parse_spec(stack_spec(name))), **kw)


@pytest.mark.parametrize("name", STACK_NAMES)
def test_promtool_accepts_every_stacks_rules(name, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(_watch(name)))
    run = check_rules(path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_promtool_refuses_a_broken_rule(tmp_path):
    """The check above can fail: promtool rejects an expression that does not parse."""
    doc = rule_groups(_watch("aws-p5-slurm"))
    doc["groups"][0]["rules"][0]["expr"] += " +"
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert check_rules(path).returncode != 0


@pytest.mark.parametrize("name", STACK_NAMES)
def test_every_alert_names_its_thresholds_origin(name):
    found = alerts(_watch(name))
    assert found
    for rule in found:
        assert rule["annotations"]["threshold_origin"].strip(), rule["alert"]
        assert rule["annotations"]["threshold"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning")


def _by_name(watch) -> dict:
    return {r["alert"]: r for r in alerts(watch)}


def test_thresholds_come_from_the_plan():
    """p5.48xlarge x 16 with 32 EFA devices (3200 Gbps), FSx 24000 GiB x 500 MB/s/TiB, a 70B
    checkpoint: each threshold is the plan's figure times its factor."""
    watch = _watch("aws-p5-slurm")
    rules = _by_name(watch)
    assert "< 800 and" in rules["AiclusterFabricBelowWired"]["expr"]
    assert "3200 Gbps wired" in rules["AiclusterFabricBelowWired"]["annotations"]["threshold_origin"]
    provisioned = 24000 / 1024 * 500 / 1000
    assert watch.filesystems[0].threshold.value == pytest.approx(0.9 * provisioned)
    assert rules["AiclusterGpuMissing"]["expr"].count("< 8") == 1
    from aicluster.design.balance import from_design
    write_s = from_design(design_cluster(parse_spec(stack_spec("aws-p5-slurm")))).checkpoint_write_s
    assert watch.checkpoint.value == pytest.approx(2 * write_s)
    assert "AiclusterSlurmNodesStuck" in rules and "AiclusterNodeNotReady" not in rules


def test_factors_are_configurable():
    half = _watch("aws-p5-slurm", factors=AlertFactors(fabric_fraction=0.5, tokens_fraction=0.9))
    base = _watch("aws-p5-slurm")
    assert half.fabric_pools[0].fabric_threshold.value == 1600
    assert half.tokens_per_accelerator.value == pytest.approx(base.tokens_per_accelerator.value / 0.7 * 0.9)


def test_fabric_counters_follow_the_pools_fabric():
    """EFA: the textfile counters (node_exporter cannot read EFA's hw_counters); MRDMA: the
    infiniband collector; TCPXO: the GPU NICs' netdev counters; TPU: no NIC fabric rule."""
    exprs = {n: "\n".join(f"{r.get('alert', r.get('record'))}: {r['expr']}" for g in rule_groups(_watch(n))["groups"]
                           for r in g["rules"]) for n in
             ("aws-p5-slurm", "gcp-a3ultra-slurm", "gcp-a3mega-slurm", "gcp-tpu-v5p-gke")}
    assert "aicluster_efa_rx_bytes_total" in exprs["aws-p5-slurm"]
    assert "node_infiniband_port_data_received_bytes_total" in exprs["gcp-a3ultra-slurm"]
    assert 'node_network_receive_bytes_total{pool="gpu", device=~"eth[1-8]"}' in exprs["gcp-a3mega-slurm"]
    assert "AiclusterFabricBelowWired" not in exprs["gcp-tpu-v5p-gke"]
    assert "DCGM" not in exprs["gcp-tpu-v5p-gke"]


def test_kubernetes_stacks_watch_node_conditions_and_the_health_taint():
    rules = _by_name(_watch("aws-p5-eks"))
    assert {"AiclusterNodeGpuUnhealthy", "AiclusterNodeNotReady"} <= set(rules)
    assert "AiclusterSlurmNodesStuck" not in rules
    assert GPU_UNHEALTHY_TAINT == UNHEALTHY_TAINT_KEY


def test_no_workload_means_no_checkpoint_or_throughput_rule():
    spec = stack_spec("aws-p5-slurm")
    del spec["workload"]
    rules = _by_name(monitoring_design(design_cluster(parse_spec(spec))))
    assert "AiclusterCheckpointSlow" not in rules and "AiclusterTokensBelowEstimate" not in rules


@pytest.mark.parametrize("name", STACK_NAMES)
def test_every_stack_plans_with_rules_and_dashboards(name):
    result = stack_result(name)
    assert RULES_FILE in result.files
    assert any(f.startswith(DASHBOARD_DIR + "/") for f in result.files)
    from aicluster.commands.plan_report import text, to_json
    assert "Monitoring (alert thresholds from the plan's numbers)" in text(result)
    facts = to_json(result)["monitoring"]
    assert facts["rules_file"] == RULES_FILE
    # How metrics are collected, where the logs and the alerts go: said for every stack.
    assert facts["collector"] and facts["logs"] and facts["alerts"]
    lines = text(result)
    for start in ("  metrics: ", "  logs: ", "  alerts: "):
        assert any(line.startswith(start) for line in lines), start


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "gcp-a3ultra-slurm", "aws-p5-eks"])
def test_rules_are_alerts_only(stack):
    """No recording rules: Cloud Monitoring's PromQL alerting policies (GCP) evaluate none, so an
    alert that read one would never fire there; the dashboards draw the same inline expressions."""
    rules = [r for g in rule_groups(_watch(stack))["groups"] for r in g["rules"]]
    assert rules and all("alert" in r and "record" not in r for r in rules)


@pytest.mark.parametrize("stack,collector,logs,alerts", [
    ("aws-p5-slurm", "Prometheus agent on every node", "CloudWatch agent to /aicluster/p5-train/<stream>", "SNS topic"),
    ("gcp-a3ultra-slurm", "Ops Agent on every node", "aicluster-a3ultra-train-<stream>", "Cloud Monitoring"),
    ("aws-p5-eks", "Pod Identity", "not shipped by aicluster on EKS", "SNS topic"),
    ("gcp-a3ultra-gke", "managed collection", "routed to the cluster's log bucket", "Cloud Monitoring"),
])
def test_the_plan_says_where_metrics_logs_and_alerts_go(stack, collector, logs, alerts):
    from aicluster.commands.plan_report import to_json
    facts = to_json(stack_result(stack))["monitoring"]
    assert collector in facts["collector"] and logs in facts["logs"] and alerts in facts["alerts"]


@pytest.mark.parametrize("name", STACK_NAMES)
def test_rendered_configs_are_what_pure_python_yaml_writes(name):
    """catalog.dump_yaml (libyaml's emitter) writes the same bytes as yaml.safe_dump for every
    document it is used for: each stack's rules, and every role's agent configurations."""
    from aicluster.kubernetes.capacity import kueue_manager_config
    from aicluster.render.slurm_monitoring import ROLES, cloudwatch_agent_config, ops_agent_config, prometheus_agent_config

    import aicluster.catalog as catalog
    real = catalog._TRUSTED_DUMPER

    def compare(render, *args):
        fast = render(*args)
        catalog._TRUSTED_DUMPER = yaml.SafeDumper
        try:
            assert render(*args) == fast
        finally:
            catalog._TRUSTED_DUMPER = real

    compare(rules_yaml, _watch(name))
    compare(lambda: catalog.dump_yaml(kueue_manager_config(), sort_keys=False))
    for role in ROLES:
        compare(cloudwatch_agent_config, role)
        for gpu in (False, True):
            compare(prometheus_agent_config, role, gpu)
            compare(ops_agent_config, role, gpu)
