"""A node Karpenter launches for a waiting job carries the health label the jobs require (so
Karpenter can promise it) and the startup taint
`startup-taint.cluster-autoscaler.kubernetes.io/aicluster-gpu-unchecked=true:NoSchedule` (a scaling
GKE node pool too: the cluster autoscaler leaves that prefix out of its templates).
The health agent (aicluster/node/health_agent.py) must not read that label as a verdict:
the node stays tainted until its first passing check, and a failing one keeps it out."""
from __future__ import annotations


from aicluster.kubernetes import health as k8s_health
from aicluster.node import health_agent as agent

NOW = 1_800_000_000.0


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
UNCHECKED = {"key": k8s_health.STARTUP_TAINT_KEY, "value": "true", "effect": "NoSchedule"}


def karpenter_node() -> dict:
    """A node as Karpenter registers it from the NodePool (aicluster.kubernetes.capacity.node_pool)."""
    return {"metadata": {"name": "ip-10-0-0-9", "resourceVersion": "7",
                         "labels": {k8s_health.HEALTH_LABEL: k8s_health.HEALTH_PASSED}},
            "spec": {"taints": [GPU_TAINT, UNCHECKED]}}


def test_the_agent_and_the_nodepool_agree_on_the_unchecked_value():
    import copy

    from aicluster.design.cluster import design_cluster
    from aicluster.kubernetes.capacity import node_pool
    from aicluster.spec.cluster import parse_spec
    from tests.support import BASE_SPEC

    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    template = node_pool(design_cluster(parse_spec(spec)), "gpu")["spec"]["template"]["spec"]
    assert agent.STARTUP_TAINT_KEY == k8s_health.STARTUP_TAINT_KEY
    assert template["startupTaints"] == [UNCHECKED]
    assert {"key": agent.LABEL, "operator": "In", "values": [agent.PASSED]} in template["requirements"]


def test_a_launched_node_has_no_verdict_until_its_first_check():
    node = karpenter_node()
    state = agent.initial_state(node, NOW)
    assert state.status == agent.UNDECIDED           # before: PASSED ("passed before this agent started")
    assert agent.node_patch(node, state) is None     # nothing changes: the startup taint stays


def test_a_check_that_cannot_run_leaves_the_node_tainted():
    node = karpenter_node()
    state = agent.next_state(agent.initial_state(node, NOW), agent.CheckResult("unknown", note="nvidia-smi missing"), NOW)
    assert agent.node_patch(node, state) is None


def test_a_restarted_agent_still_waits_for_a_verdict():
    """The agent restarts before its first check: the taint, not the label, decides."""
    node = karpenter_node()
    assert agent.initial_state(node, NOW).status == agent.UNDECIDED
    node["spec"]["taints"] = [GPU_TAINT]                 # once the taint is gone, the label is a verdict
    assert agent.initial_state(node, NOW).status == agent.PASSED


def test_the_first_pass_removes_the_startup_taint():
    node = karpenter_node()
    state = agent.next_state(agent.initial_state(node, NOW), agent.CheckResult("pass", note="ok"), NOW)
    patch = agent.node_patch(node, state)
    assert patch["spec"]["taints"] == [GPU_TAINT]


def test_a_first_failure_names_the_check_in_the_taint():
    node = karpenter_node()
    state = agent.next_state(agent.initial_state(node, NOW),
                             agent.CheckResult("fail", failures=(("xid", "Xid 79"),)), NOW)
    patch = agent.node_patch(node, state)
    assert patch["metadata"]["labels"] == {k8s_health.HEALTH_LABEL: "failed"}
    assert patch["spec"]["taints"] == [GPU_TAINT, {"key": k8s_health.UNHEALTHY_TAINT_KEY, "value": "xid",
                                                   "effect": "NoSchedule"}]
