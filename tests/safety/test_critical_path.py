"""The provisioning critical path (components/aicluster/design/critical_path.py): the longest chain of creations
`pulumi up` waits on, and the rule that filesystem and control plane start in parallel."""
from __future__ import annotations

import pytest

from aicluster.design.critical_path import critical_path, creation_time, timings
from aicluster.offline.capture import CapturedResource, Plan
from aicluster.design.stateful import type_key
from tests.support.stack_plans import STACK_NAMES, stack_plan

STACK = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"


def res(name, type_, deps=(), parent=STACK, custom=True, **inputs):
    urn = f"urn:pulumi:s::p::{type_}::{name}"
    return CapturedResource(urn=urn, type=type_, name=name, parent_urn=parent, custom=custom, id=name,
                            inputs=inputs, outputs={}, protect=False, retain_on_delete=False, provider=None,
                            dependencies=tuple(f"urn:pulumi:s::p::{t}::{n}" for t, n in deps))


VPC, SUBNET, FSX = "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:fsx/lustreFileSystem:LustreFileSystem"
INSTANCE, EKS, COMP = "aws:ec2/instance:Instance", "aws:eks/cluster:Cluster", "aicluster:aws:Thing"


def plan_of(*resources):
    root = CapturedResource(urn=STACK, type="pulumi:pulumi:Stack", name="p-s", parent_urn=None, custom=False,
                            id=None, inputs={}, outputs={}, protect=False, retain_on_delete=False, provider=None,
                            dependencies=())
    return Plan("p", "s", [root, *resources], {})


def test_longest_chain_weighted_by_creation_time():
    plan = plan_of(
        res("vpc", VPC),
        res("subnet", SUBNET, [(VPC, "vpc")]),
        res("fsx", FSX, [(SUBNET, "subnet")]),
        res("head", INSTANCE, [(SUBNET, "subnet")], tags={"aicluster-role": "head"}),
        res("after-head", "aws:s3/bucketObjectv2:BucketObjectv2", [(INSTANCE, "head")]),
    )
    path = critical_path(plan)
    assert [s.name for s in path.steps] == ["vpc", "subnet", "fsx"]
    expected = sum(creation_time(t).minutes for t in (VPC, SUBNET, FSX))
    assert path.total_minutes == pytest.approx(expected)
    assert path.steps[2].start == pytest.approx(creation_time(VPC).minutes + creation_time(SUBNET).minutes)
    assert path.parallel and [s.name for s in path.storage] == ["fsx"] and [s.name for s in path.control_plane] == ["head"]


def test_a_control_plane_waiting_for_the_filesystem_is_found_through_other_resources():
    plan = plan_of(
        res("fsx", FSX),
        res("script", "aws:s3/bucketObjectv2:BucketObjectv2", [(FSX, "fsx")]),
        res("head", INSTANCE, [("aws:s3/bucketObjectv2:BucketObjectv2", "script")], tags={"aicluster-role": "head"}),
    )
    path = critical_path(plan)
    assert not path.parallel and path.waits == (("head", "fsx"),)
    assert [s.name for s in path.steps] == ["fsx", "script", "head"]


def test_depending_on_a_component_waits_for_everything_under_it():
    comp = res("storage", COMP, custom=False)
    plan = plan_of(comp, res("fsx", FSX, parent=comp.urn), res("eks", EKS, [(COMP, "storage")]))
    path = critical_path(plan)
    assert path.waits == (("eks", "fsx"),)
    assert path.total_minutes == pytest.approx(creation_time(FSX).minutes + creation_time(EKS).minutes)


def test_every_timing_has_a_source_and_a_sane_range():
    default, by_type = timings()
    assert default.source and 0 < default.minutes < 1
    for key, t in by_type.items():
        assert t.source.strip(), key
        assert 0 < t.minutes <= 60, key
        if t.low is not None:
            assert t.low <= t.minutes <= t.high, key
    # The figures issue 8 names: FSx 10-15 min, EKS ~10 min, node groups ~5 min.
    assert 10 <= by_type["aws:fsx/lustreFileSystem"].minutes <= 15
    assert by_type["aws:eks/cluster"].minutes == 10 and by_type["aws:eks/nodeGroup"].minutes == 5


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_filesystem_and_control_plane_are_created_in_parallel(stack):
    """No needless dependency between the two slowest creations of a cluster: the head node or
    the EKS/GKE control plane never waits for a filesystem, nor the reverse."""
    path = critical_path(stack_plan(stack))
    assert path.control_plane, f"{stack}: no control plane found"
    assert path.parallel, f"{stack}: " + "; ".join(f"{a} waits for {b}" for a, b in path.waits)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_chain_is_a_real_dependency_chain(stack):
    plan = stack_plan(stack)
    path = critical_path(plan)
    assert path.steps and path.total_minutes == pytest.approx(path.steps[-1].finish)
    slowest = max(creation_time(r.type).minutes for r in plan.custom_resources())
    assert path.total_minutes >= slowest
    for earlier, later in zip(path.steps, path.steps[1:]):
        assert later.start == pytest.approx(earlier.finish), (earlier.name, later.name)
    assert all(type_key(s.type) for s in path.steps)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_aicluster_plan_shows_the_critical_path(stack, capsys):
    import json

    from aicluster.cli import main

    assert main(["plan", "--stack", stack, "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["critical_path"]
    path = critical_path(stack_plan(stack))
    assert found["total_minutes"] == pytest.approx(path.total_minutes, abs=0.01)
    assert [s["name"] for s in found["steps"]] == [s.name for s in path.steps]
    assert all(s["source"] for s in found["steps"])
    assert found["storage_and_control_plane_in_parallel"] is True

    assert main(["plan", "--stack", stack]) == 0
    text = capsys.readouterr().out
    section = text.split("Provisioning critical path\n", 1)[1].split("\n\n", 1)[0]
    assert f"pulumi up waits ~{path.total_minutes:.0f} min" in section
    assert all(s.name in section for s in path.steps)
    if path.storage:
        assert "filesystem and control plane are created in parallel" in section
