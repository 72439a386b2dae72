"""run_program / Plan / report: the real Pulumi SDK, in-process, against FakeCloud."""
from __future__ import annotations

import json
import re
import threading

import pulumi
import pulumi_aws as aws
import pulumi_random as random
import pytest

from aicluster.errors import Problem, SpecError
from aicluster.offline import (
    DuplicateResourceError,
    OfflineInvokeError,
    Plan,
    Secret,
    resource_table_markdown,
    resource_tree,
    run_program,
)
from aicluster.offline import engine as offline_engine
from pulumi.runtime import config as pulumi_config
from pulumi.runtime import settings as pulumi_settings

from tests.support.handwritten import forty_resources

REGION = "us-west-2"
CONFIG = {"aws:region": REGION, "aicluster:cluster": {"name": "box", "nodes": 2}}


class Box(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Box", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16", opts=child)
        self.subnet = aws.ec2.Subnet(
            "subnet", vpc_id=self.vpc.id, cidr_block="10.0.1.0/24",
            availability_zone=f"{REGION}b", opts=child,
        )
        nics = [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            device_index=0, network_card_index=0, subnet_id=self.subnet.id)]
        nics += [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            device_index=1, network_card_index=i, interface_type="efa-only" if i > 1 else "efa",
            subnet_id=self.subnet.id) for i in range(1, 33)]
        self.lt = aws.ec2.LaunchTemplate(
            "gpu-lt", instance_type="p5.48xlarge", network_interfaces=nics,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required"),
            opts=child,
        )
        self.fs = aws.fsx.LustreFileSystem(
            "scratch", subnet_ids=self.subnet.id, storage_capacity=1200,
            deployment_type="PERSISTENT_2", per_unit_storage_throughput=250,
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )
        self.password = random.RandomPassword("db-password", length=32, special=False, opts=child)
        self.secret = aws.secretsmanager.Secret("db", name="box/db", opts=child)
        aws.secretsmanager.SecretVersion(
            "db-version", secret_id=self.secret.id, secret_string=self.password.result, opts=child)
        self.register_outputs({"fsDns": self.fs.dns_name})


def box_program() -> None:
    cluster = pulumi.Config("aicluster").require_object("cluster")
    box = Box(cluster["name"])
    pulumi.export("fsDns", box.fs.dns_name)
    pulumi.export("mountName", box.fs.mount_name)
    pulumi.export("nodes", cluster["nodes"])
    pulumi.export("password", box.password.result)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return run_program(box_program, stack="dev", config=CONFIG)


def _urn(plan: Plan, name: str) -> str:
    return plan.named(name).urn


# ---------------------------------------------------------------- capture


def test_every_resource_captured_with_type_parent_and_custom(plan):
    got = {r.name: (r.type, r.custom) for r in plan.resources}
    assert got == {
        "aicluster-dev": ("pulumi:pulumi:Stack", False),
        "box": ("test:index:Box", False),
        "vpc": ("aws:ec2/vpc:Vpc", True),
        "subnet": ("aws:ec2/subnet:Subnet", True),
        "gpu-lt": ("aws:ec2/launchTemplate:LaunchTemplate", True),
        "scratch": ("aws:fsx/lustreFileSystem:LustreFileSystem", True),
        "db-password": ("random:index/randomPassword:RandomPassword", True),
        "db": ("aws:secretsmanager/secret:Secret", True),
        "db-version": ("aws:secretsmanager/secretVersion:SecretVersion", True),
    }
    stack, box = plan.resources[0], plan.named("box")
    assert stack.type == "pulumi:pulumi:Stack" and stack.parent_urn is None
    assert box.parent_urn == stack.urn
    assert {r.name for r in plan.children(box.urn)} == set(got) - {"aicluster-dev", "box"}
    assert {r.name for r in plan.custom_resources()} == set(got) - {"aicluster-dev", "box"}
    assert plan.of_type("aws:ec2/vpc:Vpc") == [plan.named("vpc")]


def test_urns_follow_the_engine_shape(plan):
    assert plan.named("box").urn == "urn:pulumi:dev::aicluster::test:index:Box::box"
    assert plan.named("vpc").urn == "urn:pulumi:dev::aicluster::test:index:Box$aws:ec2/vpc:Vpc::vpc"


def test_inputs_are_camel_case_plain_values(plan):
    lt = plan.named("gpu-lt").inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["instanceType"] == "p5.48xlarge"
    nics = lt["networkInterfaces"]
    assert type(nics) is list and all(type(n) is dict for n in nics)
    assert len(nics) == 33
    assert [n.get("interfaceType") for n in nics[:3]] == [None, "efa", "efa-only"]
    assert nics[5]["networkCardIndex"] == 5 and type(nics[5]["networkCardIndex"]) is int
    assert "metadata_options" not in lt
    fs = plan.named("scratch").inputs
    assert fs["storageCapacity"] == 1200 and fs["perUnitStorageThroughput"] == 250
    assert fs["subnetIds"] == plan.named("subnet").id


def test_protect_and_retain_flags(plan):
    fs = plan.named("scratch")
    assert fs.protect is True and fs.retain_on_delete is True
    vpc = plan.named("vpc")
    assert vpc.protect is False and vpc.retain_on_delete is False


def test_dependencies_and_default_provider(plan):
    assert plan.named("subnet").dependencies == (_urn(plan, "vpc"),)
    assert set(plan.named("db-version").dependencies) == {_urn(plan, "db"), _urn(plan, "db-password")}
    assert plan.named("vpc").provider is None


def test_outputs_are_realistic(plan):
    vpc = plan.named("vpc")
    assert re.fullmatch(r"vpc-[0-9a-f]{17}", vpc.id)
    assert vpc.outputs["arn"] == f"arn:aws:ec2:{REGION}:123456789012:vpc/{vpc.id}"
    assert vpc.outputs["cidrBlock"] == "10.0.0.0/16"  # inputs are echoed into state
    fs = plan.named("scratch")
    assert re.fullmatch(r"fs-[0-9a-f]{17}", fs.id)
    assert fs.outputs["dnsName"] == f"{fs.id}.fsx.{REGION}.amazonaws.com"
    assert re.fullmatch(r"[a-z0-9]{8}", fs.outputs["mountName"])
    assert fs.outputs["vpcId"] == vpc.id  # looked up through the subnet
    subnet = plan.named("subnet")
    assert subnet.outputs["availabilityZoneId"] == "usw2-az2"
    assert plan.named("db").id.startswith(f"arn:aws:secretsmanager:{REGION}:123456789012:secret:box/db-")


def test_component_outputs_and_exports(plan):
    dns = plan.named("scratch").outputs["dnsName"]
    assert plan.named("box").outputs == {"fsDns": dns}
    assert plan.outputs["fsDns"] == dns
    assert plan.outputs["nodes"] == 2
    assert plan.outputs["mountName"] == plan.named("scratch").outputs["mountName"]


def test_secrets_are_marked_and_redacted(plan):
    password = plan.named("db-password").outputs["result"]
    assert isinstance(password, Secret) and len(password.value) == 32
    version = plan.named("db-version").inputs["secretString"]
    assert version == password
    assert isinstance(plan.outputs["password"], Secret)
    dumped = json.dumps(plan.to_json())
    assert password.value not in dumped
    assert plan.to_json()["outputs"]["password"] == "[secret]"
    assert "[secret]" in json.dumps(plan.named("db-version").to_json()["inputs"])
    assert password.value not in repr(plan.named("db-password"))


def test_named_errors_are_helpful(plan):
    with pytest.raises(KeyError, match="no resource named 'nope'.*gpu-lt"):
        plan.named("nope")


# ---------------------------------------------------------------- determinism / isolation


def test_two_runs_are_identical():
    first = run_program(box_program, stack="dev", config=CONFIG)
    second = run_program(box_program, stack="dev", config=CONFIG)
    assert json.dumps(first.to_json()) == json.dumps(second.to_json())
    assert first.named("db-password").outputs["result"] == second.named("db-password").outputs["result"]


def test_names_drive_ids():
    other = dict(CONFIG, **{"aicluster:cluster": {"name": "box2", "nodes": 1}})
    a = run_program(box_program, stack="dev", config=CONFIG)
    b = run_program(box_program, stack="dev", config=other)
    assert a.named("box").urn != b.named("box2").urn


def test_consecutive_runs_do_not_leak(plan):
    seen = {}

    def other_program() -> None:
        seen["cluster"] = pulumi.Config("aicluster").get("cluster")
        seen["region"] = pulumi.Config("aws").get("region")
        aws.ec2.Vpc("lonely", cidr_block="10.9.0.0/16")

    second = run_program(other_program, stack="prod", config={"gcp:project": "p"})
    assert [r.name for r in second.resources] == ["aicluster-prod", "lonely"]
    assert second.outputs == {}
    assert seen == {"cluster": None, "region": None}
    assert second.named("lonely").outputs["arn"].startswith("arn:aws:ec2:us-east-1:")
    # and the first plan was not disturbed by the second run
    assert len(plan.resources) == 9


def test_caller_runtime_state_untouched():
    before = (pulumi_settings.SETTINGS.monitor, pulumi_settings.get_root_resource(),
              pulumi_settings.SETTINGS.project)
    run_program(box_program, stack="dev", config=CONFIG)
    after = (pulumi_settings.SETTINGS.monitor, pulumi_settings.get_root_resource(),
             pulumi_settings.SETTINGS.project)
    assert after == before
    assert pulumi_config.get_config("aicluster:cluster") is None


def test_many_runs_do_not_leak_threads():
    run_program(box_program, stack="dev", config=CONFIG)
    baseline = threading.active_count()
    for _ in range(5):
        run_program(box_program, stack="dev", config=CONFIG)
    assert threading.active_count() <= baseline


# ---------------------------------------------------------------- failures


def test_program_exception_propagates_unchanged_and_next_run_works():
    error = SpecError([Problem("pools[0].max_nodes", -1, "must be >= 0")])

    def failing() -> None:
        aws.ec2.Vpc("half-built", cidr_block="10.0.0.0/16")
        raise error

    with pytest.raises(SpecError) as caught:
        run_program(failing, stack="dev", config=CONFIG)
    assert caught.value is error
    after = run_program(box_program, stack="dev", config=CONFIG)
    assert "half-built" not in {r.name for r in after.resources}
    assert len(after.resources) == 9


def test_exception_inside_apply_propagates():
    class Boom(Exception):
        pass

    def failing() -> None:
        vpc = aws.ec2.Vpc("v", cidr_block="10.0.0.0/16")
        pulumi.export("x", vpc.id.apply(lambda _: (_ for _ in ()).throw(Boom("in apply"))))

    with pytest.raises(Boom, match="in apply"):
        run_program(failing, stack="dev", config={})
    assert run_program(box_program, stack="dev", config=CONFIG).outputs["nodes"] == 2


def test_unknown_invoke_raises_clear_error():
    def program() -> None:
        aws.ec2.get_ami(most_recent=True, owners=["amazon"])

    with pytest.raises(OfflineInvokeError, match="aws:ec2/getAmi:getAmi.*must not depend on invokes"):
        run_program(program, stack="dev", config={})


def test_supported_invokes_answer_from_config():
    def program() -> None:
        pulumi.export("account", aws.get_caller_identity().account_id)
        pulumi.export("region", aws.get_region().region)
        pulumi.export("azs", aws.get_availability_zones().names)
        pulumi.export("dns", aws.get_partition().dns_suffix)

    out = run_program(program, stack="dev", config={"aws:region": "eu-west-1"}).outputs
    assert out == {"account": "123456789012", "region": "eu-west-1", "dns": "amazonaws.com",
                   "azs": ["eu-west-1a", "eu-west-1b", "eu-west-1c", "eu-west-1d"]}


def test_duplicate_urn_fails_like_the_engine():
    def program() -> None:
        aws.ec2.Vpc("twin")
        aws.ec2.Vpc("twin")

    with pytest.raises(DuplicateResourceError, match="twin"):
        run_program(program, stack="dev", config={})


def test_explicit_provider_region_and_reference():
    def program() -> None:
        west = aws.Provider("eu", region="eu-central-1")
        aws.ec2.Vpc("eu-vpc", cidr_block="10.0.0.0/16", opts=pulumi.ResourceOptions(provider=west))

    plan = run_program(program, stack="dev", config={})
    provider = plan.named("eu")
    assert provider.type == "pulumi:providers:aws"
    vpc = plan.named("eu-vpc")
    assert vpc.provider == f"{provider.urn}::{provider.id}"
    assert vpc.outputs["arn"].startswith("arn:aws:ec2:eu-central-1:")


def test_get_lookups_are_captured_as_reads():
    def program() -> None:
        pulumi.export("arn", aws.ec2.Vpc.get("existing", "vpc-0123456789abcdef0").arn)

    plan = run_program(program, stack="dev", config={})
    found = plan.named("existing")
    assert found.read is True and found.custom is True and found.id == "vpc-0123456789abcdef0"
    assert plan.outputs["arn"] == "arn:aws:ec2:us-east-1:123456789012:vpc/vpc-0123456789abcdef0"


def test_config_values_are_encoded_like_pulumi():
    seen = {}

    def program() -> None:
        cfg = pulumi.Config("aicluster")
        seen.update(obj=cfg.require_object("obj"), flag=cfg.require_bool("flag"),
                    n=cfg.require_int("n"), s=cfg.require("s"),
                    secret_keys=[k for k in ("aicluster:token", "aicluster:s")
                                 if pulumi.runtime.is_config_secret(k)])
        pulumi.export("token", cfg.require_secret("token"))

    plan = run_program(program, stack="dev", config={
        "aicluster:obj": {"a": [1, 2]}, "aicluster:flag": True, "aicluster:n": 3,
        "aicluster:s": "text", "aicluster:token": Secret("hunter2"),
    })
    assert seen == {"obj": {"a": [1, 2]}, "flag": True, "n": 3, "s": "text",
                    "secret_keys": ["aicluster:token"]}
    assert plan.outputs["token"] == Secret("hunter2")


# ---------------------------------------------------------------- report


def test_resource_tree_groups_children_under_component(plan):
    lines = resource_tree(plan)
    assert not any("pulumi:pulumi:Stack" in line for line in lines)
    assert lines[0] == "test:index:Box  box"
    assert len(lines) == 8 and all(line.startswith("  aws:") or line.startswith("  random:") for line in lines[1:])
    fs_line = next(line for line in lines if "  scratch" in line)
    assert fs_line.endswith("[protect] [retain]")
    assert "PERSISTENT_2, 1200 GiB, 250 MB/s/TiB" in fs_line
    lt_line = next(line for line in lines if "gpu-lt" in line)
    assert "p5.48xlarge" in lt_line and "33 NICs: 1 ENA + 32 EFA" in lt_line and "httpTokens=required" in lt_line
    assert "10.0.1.0/24 in us-west-2b" in next(line for line in lines if "  subnet" in line)
    assert "[protect]" not in next(line for line in lines if "  vpc" in line)


def test_resource_tree_nests_components_by_depth():
    class Outer(pulumi.ComponentResource):
        def __init__(self, name):
            super().__init__("test:index:Outer", name, None)
            inner = pulumi.ComponentResource("test:index:Inner", "inner", None, pulumi.ResourceOptions(parent=self))
            aws.ec2.PlacementGroup("pg", strategy="cluster", opts=pulumi.ResourceOptions(parent=inner))

    plan = run_program(lambda: Outer("outer"), stack="dev", config={})
    assert resource_tree(plan) == [
        "test:index:Outer  outer",
        "  test:index:Inner  inner",
        "    aws:ec2/placementGroup:PlacementGroup  pg  (strategy=cluster)",
    ]
    table = resource_table_markdown(plan)
    assert table[2] == "| outer/inner | `aws:ec2/placementGroup:PlacementGroup` | pg | strategy=cluster |  |"


def test_markdown_table(plan):
    table = resource_table_markdown(plan)
    assert table[0] == "| Component | Type | Name | Key settings | Flags |"
    assert len(table) == 2 + 7  # header, rule, one row per custom resource
    row = next(line for line in table if "| scratch |" in line)
    assert row.startswith("| box | `aws:fsx/lustreFileSystem:LustreFileSystem` |")
    assert row.endswith("| [protect] [retain] |")


# ---------------------------------------------------------------- speed


def test_forty_resource_plan_captures_every_resource_and_its_wiring():
    """Forty resources, each captured once with its inputs wired to the outputs it was given. (How
    long the engine takes is measured by bench/offline_engine.py, not asserted here.)"""
    plan = run_program(forty_resources, stack="dev", config={})
    custom = plan.custom_resources()
    assert len(custom) == 40 and len({r.urn for r in custom}) == 40 and len({r.id for r in custom}) == 40
    assert sorted(r.type for r in custom) == sorted(["aws:ec2/vpc:Vpc"] + 13 * [
        "aws:ec2/subnet:Subnet", "aws:ec2/securityGroup:SecurityGroup", "aws:ec2/instance:Instance"])
    vpc = plan.named("vpc")
    for i in range(13):
        subnet, sg, instance = plan.named(f"s{i}"), plan.named(f"sg{i}"), plan.named(f"i{i}")
        assert subnet.inputs["vpcId"] == vpc.id and sg.inputs["vpcId"] == vpc.id
        assert subnet.inputs["cidrBlock"] == f"10.0.{i}.0/24"
        assert instance.inputs["subnetId"] == subnet.id and instance.inputs["vpcSecurityGroupIds"] == [sg.id]
        assert set(instance.dependencies) == {subnet.urn, sg.urn}
    assert json.dumps(plan.to_json()) == json.dumps(run_program(forty_resources, stack="dev", config={}).to_json())


def test_engine_restores_sdk_defaults():
    props = offline_engine._context_properties()
    before = [p._ContextProperty__default for p in props]
    run_program(box_program, stack="dev", config=CONFIG)
    assert [p._ContextProperty__default for p in props] == before


def test_no_stack_trace_only_during_an_offline_run():
    """The SDK's per-registration stack trace is skipped while run_program runs (the capture
    monitor never reads it) and is the SDK's own again afterwards, also after a failed run."""
    from pulumi.runtime import resource as pulumi_resource

    sdk = pulumi_resource._get_stack_trace       # an SDK upgrade that renames it fails here first
    seen = []

    def program() -> None:
        seen.append(pulumi_resource._get_stack_trace)
        aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")

    run_program(program, stack="dev", config=CONFIG)
    assert seen == [offline_engine._no_stack_trace]
    assert not offline_engine._no_stack_trace().frames
    assert pulumi_resource._get_stack_trace is sdk

    def failing() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_program(failing, stack="dev", config=CONFIG)
    assert pulumi_resource._get_stack_trace is sdk
