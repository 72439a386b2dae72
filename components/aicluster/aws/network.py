"""aicluster:aws:Network - the VPC (or an existing one), the private cluster subnet, egress, an
S3 gateway endpoint, and the two security groups the fabric and the filesystem need.

Security groups:
- `nodes`: every compute interface. EFA needs all traffic allowed from AND to the group itself
  (ParallelCluster's EfaSecurityGroupValidator); Lustre servers reach clients on 988/1018-1023.
- `storage`: only the filesystem. Kept separate and rule-free at creation so that no change to
  node rules ever touches the filesystem's inputs (ParallelCluster #4651: a security-group change
  replaced a managed FSx and lost its data).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from ..design import ClusterContext, NetworkDesign

LUSTRE_PORTS = ((988, 988), (1018, 1023))   # FSx for Lustre user guide, "File system access control with Amazon VPC"


@dataclass(frozen=True)
class NetworkArgs:
    """The cluster's network.

    context: the cluster's name (resource descriptions, Name tags), region (the S3 endpoint's
        service name), zone (the subnets') and tags (`ClusterDesign.context`, or your own).
    network: the network's design: a new VPC and its CIDRs (`create_vpc`, `vpc_cidr`,
        `private_subnet_cidr`, `public_subnet_cidr`), or an existing VPC and subnet
        (`existing_vpc_id`, `existing_subnet_id`), used as they are (`ClusterDesign.network`).
    """
    context: ClusterContext
    network: NetworkDesign


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    public_subnet_id: pulumi.Output[str] | None   # None with an existing network
    nodes_security_group_id: pulumi.Output[str]
    storage_security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:Network", name, None, opts)
        cluster, net = args.context, args.network
        tags = cluster.labels("network")
        child = pulumi.ResourceOptions(parent=self)

        if net.create_vpc:
            self.vpc_id, self.subnet_id, self.public_subnet_id = self._create_vpc(name, cluster, net, tags, child)
        else:
            self.vpc_id = pulumi.Output.from_input(net.existing_vpc_id)
            self.subnet_id = pulumi.Output.from_input(net.existing_subnet_id)
            self.public_subnet_id = None

        storage_sg = aws.ec2.SecurityGroup(
            f"{name}-storage",
            description=f"aicluster {cluster.name}: parallel filesystem (Lustre 988, 1018-1023)",
            vpc_id=self.vpc_id,
            tags=cluster.labels("storage"),
            opts=child,
        )
        nodes_sg = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            description=f"aicluster {cluster.name}: compute nodes and EFA (all traffic within the group)",
            vpc_id=self.vpc_id,
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="-1", from_port=0, to_port=0, self=True,
                    description="EFA and node-to-node traffic from this group"),
                *[aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp", from_port=low, to_port=high, security_groups=[storage_sg.id],
                    description="Lustre servers to clients") for low, high in LUSTRE_PORTS],
            ],
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0, self=True,
                    description="EFA and node-to-node traffic to this group"),
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"],
                    description="Outbound through the NAT gateway and the S3 endpoint"),
            ],
            tags=cluster.labels("compute"),
            opts=child,
        )
        # Storage rules are separate resources (never inline on the group): edits to them update
        # rules only and leave the group, and so the filesystem, untouched.
        storage_opts = pulumi.ResourceOptions(parent=self, depends_on=[storage_sg])
        for low, high in LUSTRE_PORTS:
            for source, label in ((nodes_sg.id, "nodes"), (storage_sg.id, "self")):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-storage-in-{label}-{low}",
                    security_group_id=storage_sg.id,
                    referenced_security_group_id=source,
                    ip_protocol="tcp", from_port=low, to_port=high,
                    description=f"Lustre {low}-{high} from {label}",
                    tags=cluster.labels("storage"),
                    opts=storage_opts,
                )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-storage-out",
            security_group_id=storage_sg.id,
            ip_protocol="-1", cidr_ipv4="0.0.0.0/0",
            description="Filesystem servers to clients and data repositories",
            tags=cluster.labels("storage"),
            opts=storage_opts,
        )

        self.nodes_security_group_id = nodes_sg.id
        self.storage_security_group_id = storage_sg.id
        self.register_outputs({
            "vpc_id": self.vpc_id,
            "subnet_id": self.subnet_id,
            "nodes_security_group_id": nodes_sg.id,
            "storage_security_group_id": storage_sg.id,
        })

    def _create_vpc(self, name: str, cluster: ClusterContext, net: NetworkDesign, tags: dict,
                    child: pulumi.ResourceOptions):
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=net.vpc_cidr, enable_dns_support=True,
                          enable_dns_hostnames=True, tags={**tags, "Name": f"{cluster.name}"}, opts=child)
        private = aws.ec2.Subnet(
            f"{name}-private", vpc_id=vpc.id, cidr_block=net.private_subnet_cidr,
            availability_zone=cluster.zone, map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{cluster.name}-private"}, opts=child)
        public = aws.ec2.Subnet(
            f"{name}-public", vpc_id=vpc.id, cidr_block=net.public_subnet_cidr,
            availability_zone=cluster.zone, map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{cluster.name}-public"}, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=child)
        eip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tags, opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", subnet_id=public.id, allocation_id=eip.id,
                                 connectivity_type="public", tags=tags,
                                 opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt", vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags, opts=child)
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt", vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=tags, opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-public-rta", subnet_id=public.id,
                                      route_table_id=public_rt.id, opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-private-rta", subnet_id=private.id,
                                      route_table_id=private_rt.id, opts=child)
        # Checkpoints and datasets move to and from S3 without NAT charges or NAT bandwidth limits.
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, service_name=f"com.amazonaws.{cluster.region}.s3",
                            vpc_endpoint_type="Gateway", route_table_ids=[private_rt.id], tags=tags, opts=child)
        return vpc.id, private.id, public.id
