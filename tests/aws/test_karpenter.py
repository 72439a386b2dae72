"""Karpenter on EKS (issue 16, capacity): one NodePool + EC2NodeClass per pool that grows past its
node group, naming what the pool's launch template names, valid against the pinned release's CRDs,
with a least-privilege controller identity and an interruption queue.

The stack is the 16-node p5 example with min_nodes 0: nothing runs until a job is admitted."""
from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
import yaml

from aicluster.kubernetes.capacity import KARPENTER_CAPACITY, ami_alias, karpenter_pools, node_pool
from aicluster.design.kubernetes import versions
from tests.support import BASE_SPEC, CR
from tests.support.karpenter_schema import SCHEMAS, cel_rules
from tests.support.manifests import rendered_manifests, validate
from tests.support.stack_plans import result_with_spec, stack_result, stack_spec_data

STACK = "aws-p5-eks"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def from_zero() -> dict:
    spec = stack_spec_data(STACK)
    spec["pools"][0]["min_nodes"] = 0
    return spec


@pytest.fixture(scope="module")
def result():
    return result_with_spec(STACK, from_zero())


@pytest.fixture(scope="module")
def objects(result) -> dict[str, dict]:
    docs = [d for docs in rendered_manifests(result.files).values() for d in docs]
    return {d["kind"]: d for d in docs if d["apiVersion"].startswith("karpenter.")}


def test_a_pool_that_scales_from_zero_gets_a_nodepool_nodeclass_and_overlay(objects):
    assert set(objects) == {"NodePool", "EC2NodeClass", "NodeOverlay"}
    assert objects["NodePool"]["spec"]["limits"] == {"nodes": 16}      # the whole pool: the group keeps 0


def test_a_fixed_size_pool_gets_no_karpenter():
    """A fixed fleet (16..16) keeps its node group only: no chart, no NodePool, no IAM role."""
    spec = stack_spec_data(STACK)
    spec["pools"][0]["min_nodes"] = 16
    result = result_with_spec(STACK, spec)
    assert not any("karpenter" in name or "nodepool" in name for name in result.files)
    assert not result.plan.of_type("aicluster:aws:Karpenter")


def test_the_stock_stack_scales_from_zero():
    """The example stack is the issue's 16-node p5 cluster with min_nodes 0."""
    assert stack_spec_data(STACK)["pools"][0]["min_nodes"] == 0
    assert stack_result(STACK).plan.of_type("aicluster:aws:Karpenter")


def test_every_karpenter_object_is_valid_against_the_pinned_crds(objects):
    for obj in objects.values():
        validate(obj)


def _launch_template(result):
    (template,) = [r for r in result.plan.of_type(LAUNCH_TEMPLATE) if r.name == f"{result.design.name}-gpu-template"]
    return template


def test_the_nodeclass_names_what_the_pools_launch_template_names(result, objects):
    plan, spec = result.plan, objects["EC2NodeClass"]["spec"]
    template = _launch_template(result).inputs
    group = plan.named(f"{result.design.name}-gpu-eks-nodegroup", NODE_GROUP).inputs
    # The subnet and security groups of the node group and its template.
    assert spec["subnetSelectorTerms"] == [{"id": group["subnetIds"][0]}]
    assert [t["id"] for t in spec["securityGroupSelectorTerms"]] == template["networkInterfaces"][0]["securityGroups"]
    # The nodes' own instance profile (the node group's role): no profile Karpenter makes.
    profile = plan.of_type("aws:iam/instanceProfile:InstanceProfile")[0]
    assert spec["instanceProfile"] == profile.outputs["name"]
    assert profile.inputs["role"] == plan.named(f"{result.design.name}-compute-role").outputs["name"]
    # The placement group of the pool.
    (placement,) = plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert spec["placementGroupSelector"] == {"name": placement.outputs["name"]}
    assert template["placement"]["groupName"] == placement.outputs["name"]
    # Every EFA device, laid out as the template lays them out.
    nics = [{k: n[k] for k in ("networkCardIndex", "deviceIndex", "interfaceType")} for n in template["networkInterfaces"]]
    assert spec["networkInterfaces"] == nics
    assert sum(n["interfaceType"] == "efa-only" for n in spec["networkInterfaces"]) == result.design.pool("gpu").efa_devices
    # IMDSv2 with hop limit 1, encrypted root volume, RAID0 instance store, the same user data.
    assert spec["metadataOptions"]["httpTokens"] == "required" and spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and root["deviceName"] == template["blockDeviceMappings"][0]["deviceName"]
    assert spec["instanceStorePolicy"] == "RAID0"
    import base64
    assert spec["userData"] == base64.b64decode(template["userData"]).decode()


def test_the_nodeclass_runs_the_ami_release_the_node_groups_pin(objects):
    release = versions().ami_types["gpu"]["release_version"]            # 1.35.6-20260714
    assert objects["EC2NodeClass"]["spec"]["amiSelectorTerms"] == [{"alias": ami_alias()}]
    assert ami_alias() == f"al2023@v{release.split('-')[-1]}"


def test_the_nodepool_carries_the_pools_labels_taint_type_and_zone(result, objects):
    pool = result.design.kubernetes.pool("gpu")
    template = objects["NodePool"]["spec"]["template"]
    assert template["metadata"]["labels"] == dict(pool.labels)
    assert template["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements == {"node.kubernetes.io/instance-type": ["p5.48xlarge"],
                            "topology.kubernetes.io/zone": [result.design.zone],
                            "karpenter.sh/capacity-type": ["on-demand"],
                            "aicluster.io/gpu-health": ["passed"]}
    # Born with the startup taint: no pod lands before the health agent's first pass removes it.
    assert template["spec"]["startupTaints"] == [{"key": "startup-taint.cluster-autoscaler.kubernetes.io/"
                                                         "aicluster-gpu-unchecked", "value": "true",
                                                  "effect": "NoSchedule"}]
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                "name": objects["EC2NodeClass"]["metadata"]["name"]}


def test_karpenter_never_disrupts_a_node_that_runs_a_gang(objects):
    spec = objects["NodePool"]["spec"]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["template"]["spec"]["expireAfter"] == "Never"
    assert {"nodes": "0", "reasons": ["Drifted"]} in spec["disruption"]["budgets"]


def test_the_overlay_gives_karpenter_the_huge_pages_efa_nodes_have(result, objects):
    pool = result.design.kubernetes.pool("gpu")
    overlay = objects["NodeOverlay"]["spec"]
    assert overlay["capacity"] == {"hugepages-2Mi": f"{pool.hugepages_per_node * 2}Mi"}
    assert overlay["requirements"] == [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                        "values": ["p5.48xlarge"]}]


@pytest.mark.parametrize("capacity, karpenter", [
    ({"type": "on-demand"}, "on-demand"), ({"type": "spot"}, "spot"),
    ({"type": "reservation", "reservation_id": CR}, "reserved"),
    ({"type": "capacity-block", "reservation_id": CR}, "reserved"),
])
def test_each_capacity_type_maps_to_karpenters(capacity, karpenter):
    from aicluster.design.cluster import design_cluster
    from aicluster.kubernetes.capacity import NodeClassInputs, node_class
    from aicluster.spec.cluster import parse_spec

    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    spec["pools"][0]["capacity"] = capacity
    design = design_cluster(parse_spec(spec))
    assert KARPENTER_CAPACITY[capacity["type"]] == karpenter
    requirement = {r["key"]: r["values"] for r in node_pool(design, "gpu")["spec"]["template"]["spec"]["requirements"]}
    assert requirement["karpenter.sh/capacity-type"] == [karpenter]
    ids = NodeClassInputs(subnet_id="subnet-0abc", security_group_ids=[{"id": "sg-0abc"}], instance_profile="p",
                          user_data="#cloud-config\n")
    nodeclass = node_class(design, "gpu", ids)
    terms = nodeclass["spec"].get("capacityReservationSelectorTerms")
    assert terms == ([{"id": CR}] if karpenter == "reserved" else None)
    validate(nodeclass)
    validate(node_pool(design, "gpu"))
    # A capacity block's node group starts empty: the NodePool covers the whole block.
    if capacity["type"] == "capacity-block":
        assert node_pool(design, "gpu")["spec"]["limits"] == {"nodes": 16}
        assert [p.name for p in karpenter_pools(design.kubernetes)] == ["gpu"]


@pytest.mark.parametrize("breaks", [
    lambda o: o["NodePool"]["spec"]["template"]["spec"].update(capacityType="on-demand"),   # misplaced field
    lambda o: o["NodePool"]["spec"]["disruption"].update(consolidationPolicy="WhenIdle"),   # not an enum value
    lambda o: o["NodePool"]["spec"]["template"]["spec"].pop("nodeClassRef"),                # required
    lambda o: o["EC2NodeClass"]["spec"]["networkInterfaces"][1].update(interfaceType="efa"),  # efa-only or interface
    lambda o: o["EC2NodeClass"]["spec"]["placementGroupSelector"].update(id="placement-1"),   # pattern ^pg-
    lambda o: o["EC2NodeClass"]["spec"]["metadataOptions"].update(httpTokens="always"),
    lambda o: o["EC2NodeClass"]["spec"].update(launchTemplate="lt-0abc"),                    # Karpenter takes none
    lambda o: o["NodeOverlay"]["spec"].update(capacity="10256Mi"),
], ids=["misplaced-capacity-type", "consolidation-policy", "no-nodeclassref", "efa-interface-type",
        "placement-group-id", "http-tokens", "launch-template", "overlay-capacity"])
def test_a_broken_object_fails_its_schema(objects, breaks):
    broken = copy.deepcopy(objects)
    breaks(broken)
    with pytest.raises(jsonschema.ValidationError):
        for obj in broken.values():
            jsonschema.validate(obj, SCHEMAS[(obj["apiVersion"], obj["kind"])])


def test_the_interfaces_pass_the_crds_cel_rules(objects):
    """The CEL rules jsonschema cannot run, evaluated here: a primary `interface` on card 0 device
    0, and at most one efa-only per network card. The rules are still the release's own."""
    rules = cel_rules("karpenter.k8s.aws/v1", "EC2NodeClass")
    assert "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && " \
           "x.interfaceType == 'interface')" in rules
    nics = objects["EC2NodeClass"]["spec"]["networkInterfaces"]
    assert any(n["deviceIndex"] == 0 and n["networkCardIndex"] == 0 and n["interfaceType"] == "interface" for n in nics)
    pairs = [(n["networkCardIndex"], n["deviceIndex"]) for n in nics]
    assert len(pairs) == len(set(pairs))
    efa_cards = [n["networkCardIndex"] for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa_cards) == len(set(efa_cards))
    # NodePool: a label the template sets may not be in karpenter.sh's domain.
    assert not any(k.split("/")[0].endswith("karpenter.sh") for k in objects["NodePool"]["spec"]["template"]["metadata"]["labels"])


def test_a_pool_with_efa_interfaces_leaves_them_to_karpenters_efa_requests():
    """A type whose layout uses `efa` interfaces (not in the CRD's enum) gets no networkInterfaces:
    Karpenter then attaches one EFA interface per card for the worker's EFA request."""
    import dataclasses

    from aicluster.design.parts import NetworkInterface
    from aicluster.kubernetes.capacity import karpenter_interfaces
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    pool = design_cluster(parse_spec(spec)).pool("gpu")
    older = dataclasses.replace(pool, interfaces=(NetworkInterface(0, 0, "efa"), NetworkInterface(1, 0, "efa")))
    assert karpenter_interfaces(older) is None
    assert karpenter_interfaces(pool)[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}


def test_the_chart_is_the_pinned_one_on_the_system_nodes(result):
    release = yaml.safe_load(result.files["k8s/helm/karpenter.yaml"])
    chart = versions().charts["karpenter"]
    assert (release["chart"], str(release["version"]), release["namespace"]) == \
        (f"{chart.repo}/{chart.chart}", chart.version, "kube-system")
    values = release["values"]
    assert values["nodeSelector"]["aicluster.io/role"] == "system"
    assert values["settings"]["clusterName"] == result.design.name
    assert values["settings"]["interruptionQueue"] == f"{result.design.name}-karpenter"
    assert values["settings"]["featureGates"] == {"nodeOverlay": True}
    assert {"name": "AWS_REGION", "value": result.design.region} in values["controller"]["env"]


def _controller_policy(plan) -> dict:
    (policy,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("karpenter-controller")]
    return json.loads(policy.inputs["policy"])


def test_the_controller_identity_is_pod_identity_for_its_service_account_only(result):
    plan = result.plan
    (association,) = [r for r in plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if r.name.endswith("karpenter-controller")]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "karpenter")
    role = plan.named(f"{result.design.name}-karpenter-controller", "aws:iam/role:Role")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "pods.eks.amazonaws.com"}]
    assert association.inputs["roleArn"] == role.outputs["arn"]


def test_the_controller_policy_is_scoped_to_this_cluster(result):
    cluster = result.design.name
    statements = _controller_policy(result.plan)["Statement"]
    actions = [a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    assert not any(a.endswith("*") for a in actions)
    # No instance profile of its own: the EC2NodeClass names the nodes' profile.
    assert not any(a.startswith("iam:") and a not in ("iam:PassRole", "iam:GetInstanceProfile",
                                                        "iam:ListInstanceProfiles") for a in actions)
    by_sid = {s["Sid"]: s for s in statements}
    # What it launches and tags carries this cluster's tags; it terminates only its own instances.
    assert by_sid["AllowScopedEC2InstanceActionsWithTags"]["Condition"]["StringEquals"] == {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned", "aws:RequestTag/eks:eks-cluster-name": cluster}
    assert by_sid["AllowScopedDeletion"]["Condition"]["StringEquals"] == {
        f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    assert by_sid["AllowPassingInstanceRole"]["Resource"] == result.plan.named(
        f"{cluster}-compute-role", "aws:iam/role:Role").outputs["arn"]
    queue = result.plan.of_type("aws:sqs/queue:Queue")[0]
    assert by_sid["AllowInterruptionQueueActions"]["Resource"] == queue.outputs["arn"]
    unscoped = {s["Sid"] for s in statements if s["Resource"] == "*"}
    assert unscoped == {"AllowRegionalReadActions", "AllowUnscopedInstanceProfileListAction", "AllowPricingReadActions"}
    read = by_sid["AllowRegionalReadActions"]
    assert all(re.fullmatch(r"ec2:Describe\w+", a) for a in read["Action"])
    assert read["Condition"] == {"StringEquals": {"aws:RequestedRegion": result.design.region}}


def test_interruptions_reach_karpenter_through_an_encrypted_tls_only_queue(result):
    plan = result.plan
    (queue,) = plan.of_type("aws:sqs/queue:Queue")
    assert queue.inputs["sqsManagedSseEnabled"] is True
    (queue_policy,) = plan.of_type("aws:sqs/queuePolicy:QueuePolicy")
    statements = json.loads(queue_policy.inputs["policy"])["Statement"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in [s.get("Condition") for s in statements if s["Effect"] == "Deny"]
    patterns = [json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in plan.of_type("aws:cloudwatch/eventRule:EventRule")]
    assert "EC2 Spot Instance Interruption Warning" in patterns
    assert "EC2 Capacity Reservation Instance Interruption Warning" in patterns
    targets = plan.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == len(patterns) and {t.inputs["arn"] for t in targets} == {queue.outputs["arn"]}


def test_phase_one_of_a_private_cluster_installs_no_karpenter_chart_and_the_plan_says_so():
    from aicluster.design.cluster import design_cluster
    from aicluster.kubernetes.capacity import capacity_warnings
    from aicluster.spec.cluster import parse_spec

    spec = from_zero()
    spec["kubernetes"] = {**spec["kubernetes"], "api_access": "private"}
    spec["kubernetes"].pop("api_access_cidrs", None)
    result = result_with_spec(STACK, spec)
    # The cloud side is made (private and vpc have the same cloud resources); nothing in the cluster.
    assert result.plan.of_type("aicluster:aws:Karpenter") and result.plan.of_type("aws:sqs/queue:Queue")
    assert not result.plan.of_type("kubernetes:karpenter.sh/v1:NodePool")
    assert "k8s/helm/karpenter.yaml" not in result.files
    warnings = capacity_warnings(design_cluster(parse_spec(spec)))
    assert any("phase 2" in w for w in warnings)


def test_the_security_suites_checks_hold_with_karpenter(result):
    """The checks tests/security runs over every stack, on the stack that scales from zero."""
    from tests.support import checks

    resources, spec = result.plan.resources, from_zero()
    assert checks.iam_wildcards(resources) == []
    assert checks.pod_identity_grants(resources, spec) == []
    assert checks.imds_v1(resources) == []
    assert checks.unencrypted(resources) == []
    assert checks.k8s_rbac_wildcards(resources) == []


@pytest.mark.parametrize("breaks, check", [
    (lambda spec: spec["metadataOptions"].update(httpTokens="optional"), "imds_v1"),
    (lambda spec: spec["metadataOptions"].update(httpPutResponseHopLimit=3), "imds_v1"),
    (lambda spec: spec["blockDeviceMappings"][0]["ebs"].update(encrypted=False), "unencrypted"),
    (lambda spec: spec.pop("blockDeviceMappings"), "unencrypted"),
])
def test_the_security_checks_see_an_insecure_nodeclass(result, breaks, check):
    import dataclasses

    from tests.support import checks

    (nodeclass,) = result.plan.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    inputs = copy.deepcopy(nodeclass.inputs)
    breaks(inputs["spec"])
    assert getattr(checks, check)([dataclasses.replace(nodeclass, inputs=inputs)])
