"""examples/own-program: a user's own Pulumi program builds an aicluster GpuPool with no aicluster
spec, run offline under the Pulumi mocks. The launch template wires every EFA device of the
instance type, requires IMDSv2, encrypts its root volume and gives no public IP."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from aicluster.design import design_pool
from aicluster.errors import SpecError
from aicluster.offline import run_program

PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "own-program" / "__main__.py"


@pytest.fixture(scope="module")
def plan():
    return run_program(lambda: runpy.run_path(str(PROGRAM)), stack="dev", config={"aws:region": "us-east-1"},
                       project="aicluster-own-program")


def test_the_own_program_builds_a_gpu_pool_without_a_spec(plan):
    [template] = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    inputs = template.inputs
    nics = inputs["networkInterfaces"]
    assert len(nics) == 33 and sum(n["interfaceType"] == "efa-only" for n in nics) == 32   # p5: 1 ENA + 32 EFA
    assert all(n["associatePublicIpAddress"] == "false" for n in nics)
    assert inputs["metadataOptions"]["httpTokens"] == "required"
    assert inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
    assert inputs["tags"]["aicluster-cluster"] == "train" and inputs["tags"]["team"] == "research"
    [group] = plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert group.inputs["strategy"] == "cluster"
    assert [r.type for r in plan.components()] == ["aicluster:aws:GpuPool"]


def test_design_pool_refuses_a_bad_instance_type_with_a_close_match():
    with pytest.raises(SpecError) as info:
        design_pool("p5.48xlarg")
    assert "instance_type" in str(info.value) and "p5.48xlarge" in str(info.value)


def test_the_gcp_gpu_pool_builds_without_a_spec_too():
    """aicluster.gcp.GpuPool from a design_pool and a ClusterContext: every NIC of an A3 Mega
    (1 gVNIC + 8 TCPXO gVNICs), compact placement, no external IP."""
    from aicluster.design import ClusterContext
    from aicluster.gcp import GpuPool, GpuPoolArgs

    pool = design_pool("a3-megagpu-8g", cloud="gcp", max_nodes=4)

    def program():
        GpuPool("mega", GpuPoolArgs(
            context=ClusterContext(name="mega", region="us-central1", zone="us-central1-a"),
            pool=pool, nic_subnetworks=[f"projects/p/regions/us-central1/subnetworks/s{i}" for i in range(len(pool.nics))],
            service_account_email="nodes@p.iam.gserviceaccount.com"))

    plan = run_program(program, stack="dev", config={"gcp:project": "p", "gcp:region": "us-central1"})
    [template] = plan.of_type("gcp:compute/instanceTemplate:InstanceTemplate")
    nics = template.inputs["networkInterfaces"]
    assert len(nics) == 9 and all("accessConfigs" not in n for n in nics)
    [policy] = plan.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
