"""aicluster:aws:Network - the VPC (or an existing one), the private cluster subnet, egress, an
S3 gateway endpoint, and the two security groups the fabric and the filesystem need.

A VPC aicluster creates also gets (an existing VPC is left as its owner keeps it):
- its default security group emptied (no ingress, no egress rule): nothing of aicluster's uses it,
  and a resource created without a group would land in it open to the whole VPC (CIS AWS
  Foundations 5.4, "the default security group of every VPC restricts all traffic"; checkov
  CKV2_AWS_12). pulumi_aws DefaultSecurityGroup adopts the group and removes every rule not listed.
- VPC flow logs (`NetworkArgs.flow_logs`, on by default; CIS 3.9, checkov CKV2_AWS_11): every
  accepted and rejected flow into the cluster's own CloudWatch Logs group
  /aicluster/<cluster>/vpc-flow-logs, with aicluster's one log retention
  (telemetry_backend.LOG_RETENTION_DAYS), delivered by a role that only vpc-flow-logs.amazonaws.com
  may assume, for this account's flow logs (aws:SourceAccount, aws:SourceArn: the VPC user guide's
  confused-deputy conditions), and that may only create streams in, write to and describe that one
  group (`flow_log_policy`).

Security groups:
- `nodes`: every compute interface. EFA needs all traffic allowed from AND to the group itself
  (ParallelCluster's EfaSecurityGroupValidator); Lustre servers reach clients on 988/1018-1023.
- `storage`: only the filesystem. Kept separate and rule-free at creation so that no change to
  node rules ever touches the filesystem's inputs (ParallelCluster #4651: a security-group change
  replaced a managed FSx and lost its data).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext
from aicluster.design.parts import NetworkDesign
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS, log_group_name

LUSTRE_PORTS = ((988, 988), (1018, 1023))   # FSx for Lustre user guide, "File system access control with Amazon VPC"
FLOW_LOG_STREAM = "vpc-flow-logs"            # the log group /aicluster/<cluster>/vpc-flow-logs
FLOW_LOG_SERVICE = "vpc-flow-logs.amazonaws.com"


def flow_log_trust_policy(log_group_arn: str) -> dict:
    """Only the flow logs service may assume the role, and only for this account's flow logs in the
    region (the account and region read off the group's ARN: no invoke at plan time)."""
    _, part, _, region, account = log_group_arn.split(":")[:5]
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": FLOW_LOG_SERVICE}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": account},
                      "ArnLike": {"aws:SourceArn": f"arn:{part}:ec2:{region}:{account}:vpc-flow-log/*"}}}]}


def flow_log_policy(log_group_arn: str) -> dict:
    """Deliver flow logs into one group: create its streams, put events, describe it and its streams.
    Nothing else, no `*` resource: the group ARN as the provider gives it (no trailing ":*") and its
    streams <group>:log-stream:<name> (CloudWatch Logs user guide, "CloudWatch Logs resources and
    operations"), as the nodes' shipping grant names them (aws/observability.py shipping_policy). The actions are the VPC user guide's for a flow log role, less
    logs:CreateLogGroup: the group exists before the flow log."""
    arn = log_group_arn.removesuffix(":*")
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "DeliverFlowLogs", "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams", "logs:PutLogEvents"],
        "Resource": [arn, f"{arn}:log-stream:*"]}]}


@dataclass(frozen=True)
class NetworkArgs:
    """The cluster's network.

    context: the cluster's name (resource descriptions, Name tags), region (the S3 endpoint's
        service name), zone (the subnets') and tags (`ClusterDesign.context`, or your own).
    network: the network's design: a new VPC and its CIDRs (`create_vpc`, `vpc_cidr`,
        `private_subnet_cidr`, `public_subnet_cidr`), or an existing VPC and subnet
        (`existing_vpc_id`, `existing_subnet_id`), used as they are (`ClusterDesign.network`).
    flow_logs: VPC flow logs of a VPC aicluster creates, into the cluster's log group (None, the
        default: as the design says, `NetworkDesign.flow_logs`, spec `network.flow_logs`, on unless
        turned off; False: no log group, role or flow log). An existing VPC's flow logs are its owner's.
    """
    context: ClusterContext
    network: NetworkDesign
    flow_logs: bool | None = None


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
            # CIS 5.4: the VPC's default group allows nothing (no rule listed: the provider removes them all).
            aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=self.vpc_id,
                                         tags={**tags, "Name": f"{cluster.name}-default-unused"}, opts=child)
            if args.network.flow_logs if args.flow_logs is None else args.flow_logs:
                self._flow_logs(name, cluster, tags, child)
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

    def _flow_logs(self, name: str, cluster: ClusterContext, tags: dict, child: pulumi.ResourceOptions) -> None:
        group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs", name=log_group_name(cluster.name, FLOW_LOG_STREAM),
            retention_in_days=LOG_RETENTION_DAYS, tags=tags, opts=child)
        role = aws.iam.Role(
            f"{name}-flow-logs", description=f"aicluster {cluster.name}: VPC flow logs into {FLOW_LOG_STREAM}",
            assume_role_policy=group.arn.apply(lambda arn: json.dumps(flow_log_trust_policy(arn), sort_keys=True)),
            tags=tags, opts=child)
        policy = aws.iam.RolePolicy(
            f"{name}-flow-logs", role=role.id,
            policy=group.arn.apply(lambda arn: json.dumps(flow_log_policy(arn), sort_keys=True)), opts=child)
        aws.ec2.FlowLog(
            f"{name}-flow-logs", vpc_id=self.vpc_id, traffic_type="ALL", log_destination_type="cloud-watch-logs",
            log_destination=group.arn, iam_role_arn=role.arn, max_aggregation_interval=600,
            tags={**tags, "Name": f"{cluster.name}-vpc-flow-logs"},
            # The role may deliver only once its policy is attached.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))

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
