"""Least privilege for what issue 13 adds on AWS: the head reads scheduled events and spot
interruption notices (the reconcile loop), a compute node tags its own failed set-up, nothing more."""
from __future__ import annotations

import json

POLICY = "aws:iam/rolePolicy:RolePolicy"


def policy(plan, suffix: str):
    (found,) = [r for r in plan.of_type(POLICY) if r.name.endswith(suffix)]
    return found, json.loads(found.inputs["policy"])


def test_head_reads_events_and_spot_notices(plan_spec, base_spec):
    _, document = policy(plan_spec(base_spec), "-head-fleet")
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert {"ec2:DescribeInstanceStatus", "ec2:DescribeSpotInstanceRequests"} <= set(statements["Describe"]["Action"])
    assert statements["Describe"]["Resource"] == "*"
    assert all(a.startswith("ec2:Describe") for a in statements["Describe"]["Action"])


def test_compute_nodes_may_set_only_the_bootstrap_error_tag_of_their_cluster(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    resource, document = policy(plan, "-compute-bootstrap-error")
    assert resource.inputs["role"] == plan.named("demo-compute-role").outputs["name"]
    (statement,) = document["Statement"]
    assert statement["Action"] == "ec2:CreateTags" and statement["Effect"] == "Allow"
    assert statement["Resource"].startswith("arn:aws:ec2:") and statement["Resource"].endswith(":instance/*")
    assert statement["Condition"] == {
        "StringEquals": {"ec2:ResourceTag/aicluster-cluster": "demo"},
        "ForAllValues:StringEquals": {"aws:TagKeys": ["aicluster-bootstrap-error"]},
        "Null": {"aws:TagKeys": "false"}}
    # No other EC2 write for the compute role anywhere.
    compute_role = plan.named("demo-compute-role").outputs["name"]
    ec2_writes = [a for r in plan.of_type(POLICY) if r.inputs["role"] == compute_role
                  for s in json.loads(r.inputs["policy"])["Statement"]
                  for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
                  if a.startswith("ec2:") and not a.startswith("ec2:Describe")]
    assert ec2_writes == ["ec2:CreateTags"]
