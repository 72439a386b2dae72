"""No rule may crash a preview: odd shapes, empty resources and unknown values everywhere are judged
or skipped, never an exception (an exception in a policy fails the whole `pulumi preview`)."""
from __future__ import annotations

import itertools

import pytest
from pulumi_policy import (PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions, ResourceValidationArgs,
                           ResourceValidationPolicy, StackValidationArgs)
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_NUMBER_VALUE, UNKNOWN_OBJECT_VALUE, \
    UNKNOWN_STRING_VALUE, unknown_checking_proxy

from aicluster.offline.policy_bridge import load_rules

RULES = load_rules()
TYPES = sorted({t for r in RULES for t in r.SUPPORTED})
KEYS = ["instanceType", "machineType", "networkInterfaces", "placement", "tags", "labels", "storageCapacity",
        "perUnitStorageThroughput", "deploymentType", "subnetIds", "ingress", "egress", "metadataOptions",
        "blockDeviceMappings", "userData", "maxSize", "scalingConfig", "launchTemplate", "instanceTypes",
        "capacityGib", "acceleratorType", "acceleratorConfig", "nodeConfig", "zone", "location", "strategy",
        "securityGroupId", "referencedSecurityGroupId", "ipProtocol", "cidrIpv4", "sourceRanges", "allows",
        "metadata", "rootBlockDevice", "mixedInstancesPolicy", "vpcZoneIdentifiers", "availabilityZone"]
SHAPES = {
    "unknown": lambda k: {key: UNKNOWN_STRING_VALUE for key in KEYS},
    "unknown-typed": lambda k: {key: v for key, v in zip(KEYS, itertools.cycle(
        [UNKNOWN_NUMBER_VALUE, UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE]))},
    "empty": lambda k: {},
    "wrong-types": lambda k: {key: v for key, v in zip(KEYS, itertools.cycle([7.0, "x", [1, "y"], {"a": None}, True]))},
    "nested-unknowns": lambda k: {
        "instanceType": "p5.48xlarge", "machineType": "a3-megagpu-8g", "acceleratorType": "v5p-128",
        "networkInterfaces": [{"interfaceType": UNKNOWN_STRING_VALUE, "networkCardIndex": UNKNOWN_NUMBER_VALUE,
                               "securityGroups": UNKNOWN_ARRAY_VALUE, "subnetId": UNKNOWN_STRING_VALUE}],
        "placement": {"groupName": UNKNOWN_STRING_VALUE}, "tags": {"aicluster-max-nodes": "4",
                                                                  "aicluster-model-params-b": "70"},
        "storageCapacity": UNKNOWN_NUMBER_VALUE, "deploymentType": "PERSISTENT_2", "subnetIds": UNKNOWN_STRING_VALUE,
        "ingress": [{"protocol": "tcp", "fromPort": UNKNOWN_NUMBER_VALUE, "cidrBlocks": UNKNOWN_ARRAY_VALUE}],
        "userData": UNKNOWN_STRING_VALUE, "maxSize": UNKNOWN_NUMBER_VALUE,
        "nodeConfig": {"machineType": "ct5p-hightpu-4t"}, "placementPolicy": {"tpuTopology": "4x4x4"}},
}


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.ID)
def test_no_rule_raises(rule, shape):
    found = []
    report = lambda message, urn=None: found.append(message)   # noqa: E731
    tokens = [f"{t}:{t.split('/')[-1][0].upper()}{t.split('/')[-1][1:]}" for t in TYPES]
    if isinstance(rule.POLICY, ResourceValidationPolicy):
        for token in tokens:
            args = ResourceValidationArgs(token, unknown_checking_proxy(SHAPES[shape](token)), f"urn:x::{token}", "r",
                                          _opts(), None, {}, {})
            try:
                rule.POLICY.validate(args, report)
            except Exception as exc:   # noqa: BLE001
                if type(exc).__name__ != "_NotApplicableError":
                    raise
    else:
        resources = [PolicyResource(token, unknown_checking_proxy(SHAPES[shape](token)), f"urn:x::{token}::r{i}",
                                    f"r{i}", _opts(), None, None, [], {}) for i, token in enumerate(tokens)]
        try:
            rule.POLICY.validate(StackValidationArgs(resources, {}, {}), report)
        except Exception as exc:   # noqa: BLE001
            if type(exc).__name__ != "_NotApplicableError":
                raise
    assert all(isinstance(m, str) for m in found)
