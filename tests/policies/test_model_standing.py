"""The pack's standing cost (policies/rules/model/standing.py) reads the same neutral items off the
raw resources that aicluster.design.standing_cost builds from the design, and prices them with the
same function: for every example stack the plan and the pack agree, item by item and in dollars."""
from __future__ import annotations

import importlib

import pytest

from aicluster.design.standing_cost import standing_cost, standing_items
from aicluster.offline.policy_bridge import RULES_PACKAGE, load_rules, stack_resources
from tests.support.stack_plans import STACK_NAMES, stack_result


def _pack():
    load_rules()
    return (importlib.import_module(f"{RULES_PACKAGE}.model"),
            importlib.import_module(f"{RULES_PACKAGE}.model.standing"))


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_design_and_resources_give_the_same_standing_cost(stack):
    model, standing = _pack()
    result = stack_result(stack)
    cluster = model.build(stack_resources(result.plan))
    assert standing.standing_items_from_resources(cluster) == standing_items(result.design)
    assert standing.standing_from_resources(cluster) == standing_cost(result.design)


def test_a_hand_written_stack_is_read_by_what_it_creates():
    """Resources, not the spec: a second NAT gateway or a deleted secret changes the pack's items."""
    model, standing = _pack()
    resources = [r for r in stack_resources(stack_result("aws-p5-slurm").plan)
                 if r.resource_type != "aws:secretsmanager/secret:Secret"]
    items = {i.item: i for i in standing.standing_items_from_resources(model.build(resources))}
    assert "secrets" not in items
    assert items["NAT gateway"].q("count") == 1 and items["FSx for Lustre"].q("gib") == 24000
    assert items["FSx for Lustre"].region == "us-east-1"


def test_interface_endpoints_are_priced_per_endpoint_and_zone():
    """A hand-written stack's PrivateLink endpoints (aicluster makes only the free S3 gateway one)."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions

    from aicluster.offline.policy_bridge import engine_props
    model, standing = _pack()
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    endpoints = [PolicyResource("aws:ec2/vpcEndpoint:VpcEndpoint", engine_props(
        {"vpcEndpointType": "Interface", "serviceName": f"com.amazonaws.us-east-1.{svc}",
         "subnetIds": ["subnet-a", "subnet-b"]}), f"urn:x::aws:ec2/vpcEndpoint:VpcEndpoint::{svc}", svc, opts,
        None, None, [], {}) for svc in ("ssm", "ecr.api")]
    cost = standing.standing_from_resources(model.build(stack_resources(stack_result("aws-p5-slurm").plan) + endpoints))
    (line,) = [ln for ln in cost.lines if ln.item == "interface endpoints"]
    assert line.what == "2 endpoint(s) x 2 AZ(s)" and line.usd_per_hour == pytest.approx(4 * 0.01)
    assert any(n.startswith("interface endpoints: $0.01 per GB processed") for n in cost.usage_notes)


def test_no_resources_no_items():
    model, standing = _pack()
    assert standing.standing_items_from_resources(model.build([])) == ()


# Every resource type the standing cost reads, for the preview test below.
STANDING_TYPES = ("aws:fsx/lustreFileSystem", "aws:efs/fileSystem", "aws:ec2/instance", "aws:ec2/launchTemplate",
                  "aws:eks/nodeGroup", "aws:eks/cluster", "aws:ec2/natGateway", "aws:ec2/eip", "aws:ec2/vpcEndpoint",
                  "aws:rds/instance", "aws:secretsmanager/secret", "aws:route53/zone", "aws:kms/key",
                  "aws:amp/workspace", "aws:cloudwatch/logGroup", "aws:ec2/subnet")
GCP_STANDING_TYPES = ("gcp:lustre/instance", "gcp:filestore/instance", "gcp:compute/instance",
                      "gcp:container/nodePool", "gcp:container/cluster", "gcp:compute/routerNat",
                      "gcp:sql/databaseInstance", "gcp:secretmanager/secret", "gcp:dns/managedZone",
                      "gcp:monitoring/alertPolicy", "gcp:logging/projectBucketConfig")


_KEYS = ("instanceType", "machineType", "storageCapacity", "perUnitStorageThroughput", "deploymentType",
         "metadataConfiguration", "capacityGib", "fileShares", "tier", "tags", "labels", "launchTemplate",
         "blockDeviceMappings", "rootBlockDevice", "bootDisk", "scalingConfig", "instanceTypes", "nodeConfig",
         "nodeCount", "nodeLocations", "instanceClass", "allocatedStorage", "storageType", "multiAz", "settings",
         "vpcEndpointType", "subnetIds", "associatePublicIpAddress", "networkInterfaces", "retentionInDays",
         "retentionDays", "availabilityZone", "region", "zone", "location")


def _shape(name: str) -> dict:
    from pulumi_policy.proxy import (UNKNOWN_ARRAY_VALUE, UNKNOWN_NUMBER_VALUE, UNKNOWN_OBJECT_VALUE,
                                     UNKNOWN_STRING_VALUE)
    cycle = {"unknown": [UNKNOWN_STRING_VALUE],
             "unknown-typed": [UNKNOWN_NUMBER_VALUE, UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE],
             "wrong-types": [7.0, "x", [1, "y"], {"a": None}, True]}.get(name)
    if cycle is None:
        return {}
    return {key: cycle[i % len(cycle)] for i, key in enumerate(_KEYS)} | (
        {"tags": {"aicluster-role": "head"}, "labels": {"aicluster-role": "login"}} if name != "wrong-types" else {})


@pytest.mark.parametrize("types", [STANDING_TYPES, GCP_STANDING_TYPES], ids=["aws", "gcp"])
@pytest.mark.parametrize("shape", ["unknown", "unknown-typed", "empty", "wrong-types"])
def test_unknown_values_in_a_preview_never_raise(types, shape):
    """What a rule calls must survive a preview (unknown values everywhere) and odd shapes: items with
    unknowns are unpriced or zero, never an exception (one fails the whole `pulumi preview`)."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
    from pulumi_policy.proxy import unknown_checking_proxy

    model, standing = _pack()
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    tokens = [f"{t}:{t.split('/')[-1][0].upper()}{t.split('/')[-1][1:]}" for t in types]
    resources = [PolicyResource(token, unknown_checking_proxy(_shape(shape)), f"urn:x::{token}::r{i}", f"r{i}",
                                opts, None, None, [], {}) for i, token in enumerate(tokens)]
    cost = standing.standing_from_resources(model.build(resources))
    assert cost.usd_per_hour >= 0 and all(isinstance(u, str) for u in cost.unpriced)
