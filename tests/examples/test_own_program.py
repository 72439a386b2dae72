"""examples/own-program: a user's own Pulumi program builds an aicluster GpuPool with no aicluster
spec, run offline under the Pulumi mocks. The launch template wires every EFA device of the
instance type, requires IMDSv2, encrypts its root volume and gives no public IP."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from aicluster.design.cluster import design_pool
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
    from aicluster.design.model import ClusterContext
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


def _slurm_design(**kw):
    from aicluster.design.parts import SlurmDesign

    return SlurmDesign(**{"nodesets": (), "suspend_time_s": 600, "resume_timeout_s": 1800, "accounting": False,
                          "head_instance_type": "m7i.2xlarge", "head_root_volume_gib": 100,
                          "head_public_ip": False, **kw})


def test_the_aws_slurm_controller_builds_from_a_context_and_a_slurm_design():
    """No aicluster spec: a ClusterContext and a SlurmDesign are all the controller takes. The head
    is private, takes no SSH by default (SSM instead), and its secrets live under the cluster's
    own prefix; the accounting password exists once accounting is asked for."""
    from aicluster.aws import SlurmController, SlurmControllerArgs
    from aicluster.design.model import ClusterContext

    def program():
        SlurmController("own", SlurmControllerArgs(
            context=ClusterContext(name="own", region="us-east-1", zone="us-east-1a", tags={"team": "x"}),
            slurm=_slurm_design(accounting=True), vpc_id="vpc-1", subnet_id="subnet-1", public_subnet_id=None,
            nodes_security_group_id="sg-1", compute_role_name="compute"))

    plan = run_program(program, stack="dev", config={"aws:region": "us-east-1"})
    [head] = plan.of_type("aws:ec2/instance:Instance")
    assert head.inputs["instanceType"] == "m7i.2xlarge" and head.inputs["associatePublicIpAddress"] is False
    assert head.inputs["tags"]["Name"] == "own-head" and head.inputs["tags"]["team"] == "x"
    [group] = [g for g in plan.of_type("aws:ec2/securityGroup:SecurityGroup") if g.name == "own-head"]
    assert not group.inputs.get("ingress")
    secrets = sorted(s.inputs["name"] for s in plan.of_type("aws:secretsmanager/secret:Secret"))
    assert secrets == ["aicluster/own/munge-key", "aicluster/own/slurmdbd-password"]


def test_the_gcp_slurm_controller_builds_from_a_context_and_a_slurm_design():
    """The same on GCP; a head that asks for a public IP gets none on a network aicluster did not
    create (own_network defaults to False)."""
    from aicluster.design.model import ClusterContext
    from aicluster.gcp import NodeIdentity, NodeIdentityArgs, SlurmController, SlurmControllerArgs

    context = ClusterContext(name="own", region="us-central1", zone="us-central1-a")

    def program():
        nodes = NodeIdentity("own-compute", NodeIdentityArgs(context))
        SlurmController("own", SlurmControllerArgs(
            context=context, slurm=_slurm_design(head_instance_type="n2-standard-8", head_public_ip=True),
            subnetwork="projects/p/regions/us-central1/subnetworks/s", compute_identity=nodes,
            network="projects/p/global/networks/n"))

    plan = run_program(program, stack="dev", config={"gcp:project": "p", "gcp:region": "us-central1"})
    [head] = plan.of_type("gcp:compute/instance:Instance")
    assert head.inputs["name"] == "own-head" and head.inputs["machineType"] == "n2-standard-8"
    assert all("accessConfigs" not in nic for nic in head.inputs["networkInterfaces"])


def test_only_the_components_that_render_the_whole_cluster_take_a_cluster_design():
    """Every component's Args is its own design slice plus a ClusterContext. The Slurm
    configuration (it renders slurm.conf from every pool and filesystem), the Kubernetes
    add-ons (they size queues and manifests from the whole cluster) and Karpenter (its
    EC2NodeClasses carry each pool's node user data, rendered from the whole cluster as the node
    groups' is) take the whole design, and no other Args may: a new one would make that
    component unusable without an aicluster spec."""
    import dataclasses

    from aicluster import aws, gcp

    whole = set()
    for module in (aws, gcp):
        for name in module.__all__:
            if not name.endswith("Args"):
                continue
            args = getattr(module, name)
            # Annotations are strings (`from __future__ import annotations`) naming the type.
            if any(str(f.type).split(".")[-1] == "ClusterDesign" for f in dataclasses.fields(args)):
                whole.add(f"{module.__name__}.{name}")
    assert whole == {"aicluster.aws.SlurmConfigurationArgs", "aicluster.aws.KubernetesAddonsArgs",
                     "aicluster.aws.KarpenterArgs",
                     "aicluster.gcp.SlurmConfigurationArgs", "aicluster.gcp.GkeAddonsArgs"}


def test_a_context_of_ones_own_refuses_tags_that_pose_as_aicluster_labels():
    """A program of one's own never goes through the spec: ClusterContext refuses the same reserved
    keys, so `aicluster.node` cannot become the GCP label aicluster-node the power programs read."""
    import pytest

    from aicluster.design.model import ClusterContext
    from aicluster.errors import SpecError

    for key in ("aicluster.node", "AICLUSTER:pool", "aicluster-role", "aws:x"):
        with pytest.raises(SpecError) as refused:
            ClusterContext(name="own", region="us-east-1", zone="us-east-1a", tags={key: "x"})
        assert f"ClusterContext.tags.{key}" in str(refused.value)
    assert ClusterContext(name="own", region="us-east-1", zone="us-east-1a", tags={"team.aicluster": "x"}).tags
