"""A Pulumi program of your own that uses aicluster's GpuPool without an aicluster spec.

It brings its own VPC, subnet and security group, and asks aicluster for what is hard to get
right by hand: a launch template that wires every EFA device of a p5.48xlarge (1 ENA + 32 EFA,
from the catalog), IMDSv2, an encrypted root volume, no public IP, and a cluster placement group.

    cd examples/own-program && pulumi stack init dev && pulumi config set aws:region us-east-1
    pulumi up
"""
import pulumi
import pulumi_aws as aws

from aicluster.aws import GpuPool, GpuPoolArgs
from aicluster.design.model import ClusterContext
from aicluster.design.cluster import design_pool

config = pulumi.Config()
region = aws.config.region or "us-east-1"
zone = config.get("zone") or f"{region}a"

vpc = aws.ec2.Vpc("train", cidr_block="10.42.0.0/16", enable_dns_hostnames=True, enable_dns_support=True)
subnet = aws.ec2.Subnet("train", vpc_id=vpc.id, cidr_block="10.42.0.0/20", availability_zone=zone)
# EFA needs all traffic to and from the security group itself.
nodes = aws.ec2.SecurityGroup(
    "nodes", vpc_id=vpc.id, description="GPU nodes: all traffic within the group (EFA)",
    ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)],
    egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True),
            aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])])

pool = GpuPool("train-gpu", GpuPoolArgs(
    context=ClusterContext(name="train", region=region, zone=zone, tags={"team": "research"}),
    pool=design_pool("p5.48xlarge", name="gpu", max_nodes=4),
    subnet_id=subnet.id,
    security_group_ids=[nodes.id],
))

pulumi.export("launch_template_id", pool.launch_template_id)
pulumi.export("placement_group", pool.placement_group_name)
