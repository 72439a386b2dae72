"""The plan diff engine (aicluster.offline.plan_diff) on small hand-made plans: matching by URN
across stack names, the replacement rules and their conditions, Pulumi's own options, and the
cascade a replaced dependency causes."""
from __future__ import annotations

import dataclasses

import pytest

from aicluster.catalog.replacement import ReplaceRule
from aicluster.offline.capture import CapturedResource, Plan, Secret
from aicluster.offline.plan_diff import (CREATE, DELETE, REPLACE, SAME, UPDATE, diff_plans, resolve, rule_fires,
                                         urn_key)

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
SUBNET = "aws:ec2/subnet:Subnet"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def res(stack: str, rtype: str, name: str, inputs: dict, *, outputs: dict | None = None, deps=(), **options):
    urn = f"urn:pulumi:{stack}::aicluster::{rtype}::{name}"
    fields = dict(urn=urn, type=rtype, name=name, parent_urn=f"urn:pulumi:{stack}::aicluster::pulumi:pulumi:Stack::x",
                  custom=True, id=(outputs or {}).get("id"), inputs=inputs, outputs={**inputs, **(outputs or {})},
                  protect=False, retain_on_delete=False, provider=None,
                  dependencies=tuple(f"urn:pulumi:{stack}::aicluster::{d}" for d in deps))
    fields.update(options)
    return CapturedResource(**fields)


def plan(stack: str, *resources) -> Plan:
    return Plan("aicluster", stack, list(resources), {})


def subnet(stack="a", cidr="10.0.1.0/24"):
    return res(stack, SUBNET, "private", {"cidrBlock": cidr, "vpcId": "vpc-0123456789"},
               outputs={"id": "subnet-0fc61358fb006e6c0", "arn": "arn:aws:ec2:us-east-1:1:subnet/subnet-0fc61358fb006e6c0"})


def fsx(stack="a", capacity=24000, deployment="PERSISTENT_2", **inputs):
    return res(stack, FSX, "fsx", {"storageCapacity": capacity, "deploymentType": deployment,
                                   "subnetIds": ["subnet-0fc61358fb006e6c0"], **inputs},
               outputs={"id": "fs-0123456789abcdef0"}, deps=(f"{SUBNET}::private",), protect=True,
               retain_on_delete=True)


def one(diff, name):
    return next(c for c in diff.changes if c.name == name)


def test_urn_key_drops_only_the_stack():
    assert urn_key("urn:pulumi:prod::aicluster::aws:ec2/vpc:Vpc::net") == "aicluster::aws:ec2/vpc:Vpc::net"
    assert urn_key("not-a-urn") == "not-a-urn"


def test_plans_of_differently_named_stacks_compare_resource_by_resource():
    diff = diff_plans(plan("old", subnet("old"), fsx("old")), plan("new", subnet("new"), fsx("new")))
    assert [c.action for c in diff.changes] == [SAME, SAME] and not diff.dangerous


@pytest.mark.parametrize("new_capacity, action", [(12000, REPLACE), (48000, UPDATE), (24000, SAME)])
def test_a_lustre_capacity_decrease_replaces_and_an_increase_updates(new_capacity, action):
    diff = diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), fsx(capacity=new_capacity)))
    change = one(diff, "fsx")
    assert change.action == action
    assert change.dangerous == (action == REPLACE) and change.stateful == "filesystem"
    if action == REPLACE:
        assert change.replaced_by == ("storageCapacity decreased (24000 -> 12000)",)


def test_a_deployment_type_change_replaces_the_filesystem():
    change = one(diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), fsx(deployment="SCRATCH_2"))), "fsx")
    assert change.action == REPLACE and change.replaced_by == ("deploymentType changed (PERSISTENT_2 -> SCRATCH_2)",)


def test_an_in_place_input_is_an_update():
    change = one(diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), fsx(dataCompressionType="LZ4"))), "fsx")
    assert change.action == UPDATE and change.changed == ("dataCompressionType",) and not change.dangerous


def test_a_renamed_resource_is_a_delete_and_a_create():
    renamed = dataclasses.replace(fsx(), urn="urn:pulumi:a::aicluster::" + FSX + "::data", name="data")
    diff = diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), renamed))
    assert (one(diff, "fsx").action, one(diff, "data").action) == (DELETE, CREATE)
    assert [c.name for c in diff.dangerous] == ["fsx"]


def test_a_replaced_subnet_replaces_the_filesystem_in_it():
    """ParallelCluster #4651: the subnet's cidrBlock forces a new subnet, whose new id is the FSx's
    subnetIds, which forces a new filesystem. The fake cloud's ids alone would not show it."""
    diff = diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(cidr="10.0.2.0/24"), fsx()))
    assert one(diff, "private").action == REPLACE
    change = one(diff, "fsx")
    assert change.action == REPLACE and change.dangerous
    assert "depends on private (aws:ec2/subnet:Subnet), which is replaced: subnetIds" in change.replaced_by[0]


def test_an_updated_subnet_leaves_the_filesystem_alone():
    diff = diff_plans(plan("a", subnet(), fsx()),
                      plan("a", dataclasses.replace(subnet(), inputs={**subnet().inputs, "mapPublicIpOnLaunch": True}),
                           fsx()))
    assert (one(diff, "private").action, one(diff, "fsx").action) == (UPDATE, SAME)


def _template(version_bump=False):
    return res("a", TEMPLATE, "head-template", {"instanceType": "m7i.xlarge" if version_bump else "m7i.large"},
               outputs={"id": "lt-0123456789abcdef0", "latestVersion": 1})


def test_a_new_template_version_replaces_an_instance_pinned_to_it_but_rolls_a_node_group():
    lt = {"launchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"}}
    head = res("a", INSTANCE, "head", {**lt, "subnetId": "subnet-1"}, deps=(f"{TEMPLATE}::head-template",))
    group = res("a", NODE_GROUP, "system", {**lt, "clusterName": "c"}, deps=(f"{TEMPLATE}::head-template",))
    diff = diff_plans(plan("a", _template(), head, group), plan("a", _template(True), head, group))
    assert one(diff, "head-template").action == UPDATE
    assert one(diff, "head").action == REPLACE
    assert "launchTemplate.version" in one(diff, "head").replaced_by[0]
    assert one(diff, "system").action == UPDATE and one(diff, "system").changed == ("launchTemplate",)


def test_an_instance_that_ignores_its_launch_template_survives_a_new_version():
    """The Slurm head and login nodes set ignore_changes=[ami, launchTemplate] (aws/slurm.py): a tag
    edit makes a new version of their template, which must not replace them."""
    lt = {"launchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"}}
    head = res("a", INSTANCE, "head", {**lt, "subnetId": "subnet-1"}, deps=(f"{TEMPLATE}::head-template",),
               ignore_changes=("ami", "launchTemplate"))
    diff = diff_plans(plan("a", _template(), head), plan("a", _template(True), head))
    assert one(diff, "head-template").action == UPDATE and one(diff, "head").action == SAME


def test_pulumi_options_ignore_changes_and_replace_on_changes_are_honoured():
    ignoring = dataclasses.replace(fsx(deployment="SCRATCH_2"), ignore_changes=("deploymentType",))
    ignored = diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), ignoring))
    assert one(ignored, "fsx").action == UPDATE and one(ignored, "fsx").changed == ("[ignore_changes]",)
    forcing = dataclasses.replace(fsx(dataCompressionType="LZ4"), replace_on_changes=("dataCompressionType",))
    forced = diff_plans(plan("a", subnet(), fsx()), plan("a", subnet(), forcing))
    assert one(forced, "fsx").action == REPLACE
    assert one(forced, "fsx").replaced_by == ("dataCompressionType changed (replaceOnChanges)",)


def test_a_replaced_provider_replaces_what_it_manages():
    provider = res("a", "pulumi:providers:kubernetes", "k8s", {"kubeconfig": "cluster-1"},
                   outputs={"id": "0d3c2c1e-provider"})
    namespace = res("a", "kubernetes:core/v1:Namespace", "training", {"metadata": {"name": "training"}},
                    provider=f"{provider.urn}::0d3c2c1e-provider")
    other = dataclasses.replace(provider, inputs={"kubeconfig": "cluster-2"})
    diff = diff_plans(plan("a", provider, namespace), plan("a", other, namespace))
    assert one(diff, "training").action == REPLACE


def test_an_unknown_type_is_assumed_to_update_in_place_and_says_so():
    thing = res("a", "aws:new/thing:Thing", "t", {"size": 1})
    change = one(diff_plans(plan("a", thing), plan("a", dataclasses.replace(thing, inputs={"size": 2}))), "t")
    assert change.action == UPDATE and change.unknown_type


@pytest.mark.parametrize("when, old, new, fires", [
    ("decrease", 10, 5, True), ("decrease", 5, 10, False), ("increase", 5, 10, True), ("increase", 10, 5, False),
    ("narrowed", "10.0.0.0/16", "10.0.0.0/20", True), ("narrowed", "10.0.0.0/20", "10.0.0.0/16", False),
    ("narrowed", "10.0.0.0/16", "10.1.0.0/16", True), ("changed", "a", "b", True), ("changed", "a", "a", False),
])
def test_conditions(when, old, new, fires):
    assert bool(rule_fires(ReplaceRule("k", when), {"k": old}, {"k": new})) is fires


def test_presence_fires_on_a_block_added_or_removed_not_on_its_fields():
    rule = ReplaceRule("bootDisk", "presence")
    assert rule_fires(rule, {}, {"bootDisk": {"size": 1}})
    assert not rule_fires(rule, {"bootDisk": {"size": 1}}, {"bootDisk": {"size": 2}})


def test_nested_paths_look_into_lists_and_secrets():
    inputs = {"networkInterfaces": [{"nicType": "GVNIC"}, {"nicType": "RDMA"}], "s": Secret({"a": 1})}
    assert resolve(inputs, ("networkInterfaces", "nicType")) == ["GVNIC", "RDMA"]
    assert resolve(inputs, ("s", "a")) == 1
    change = rule_fires(ReplaceRule("networkInterfaces.nicType"), inputs,
                        {**inputs, "networkInterfaces": [{"nicType": "GVNIC"}, {"nicType": "GVNIC"}]})
    assert change == "networkInterfaces.nicType changed"


def test_a_secret_value_is_never_shown():
    old = {"secretString": Secret("hunter2-very-secret")}
    why = rule_fires(ReplaceRule("secretString"), old, {"secretString": Secret("other-secret")})
    assert why and "hunter2" not in why
