"""aicluster:aws:Network under mocks."""
from __future__ import annotations

SG = "aws:ec2/securityGroup:SecurityGroup"


def test_new_vpc_private_subnet_nat_and_s3_endpoint(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    vpc = plan.named("demo-network-vpc", "aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True
    private = plan.named("demo-network-private", "aws:ec2/subnet:Subnet").inputs
    assert private["cidrBlock"] == "10.0.0.0/17"
    assert private["availabilityZone"] == "us-east-1a"
    assert private["mapPublicIpOnLaunch"] is False
    nat = plan.named("demo-network-nat", "aws:ec2/natGateway:NatGateway").inputs
    assert nat["subnetId"] == plan.named("demo-network-public", "aws:ec2/subnet:Subnet").id
    private_rt = plan.named("demo-network-private-rt", "aws:ec2/routeTable:RouteTable")
    assert private_rt.inputs["routes"][0]["natGatewayId"] == plan.named("demo-network-nat", "aws:ec2/natGateway:NatGateway").id
    s3 = plan.named("demo-network-s3", "aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert s3["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert s3["vpcEndpointType"] == "Gateway"
    assert s3["routeTableIds"] == [private_rt.id]


def test_efa_security_group_allows_all_traffic_from_and_to_itself(plan_spec, base_spec):
    nodes = plan_spec(base_spec).named("demo-network-nodes", SG).inputs
    self_in = [r for r in nodes["ingress"] if r.get("self")]
    self_out = [r for r in nodes["egress"] if r.get("self")]
    assert [(r["protocol"], r["fromPort"], r["toPort"]) for r in self_in] == [("-1", 0, 0)]
    assert [(r["protocol"], r["fromPort"], r["toPort"]) for r in self_out] == [("-1", 0, 0)]
    # Nothing reaches compute nodes from outside the cluster.
    assert not any(r.get("cidrBlocks") for r in nodes["ingress"])


def test_storage_group_rules_are_separate_and_only_lustre_ports(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    storage = plan.named("demo-network-storage", SG)
    assert "ingress" not in storage.inputs and "egress" not in storage.inputs
    rules = plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    nodes_id = plan.named("demo-network-nodes", SG).id
    assert {(r.inputs["fromPort"], r.inputs["toPort"]) for r in rules} == {(988, 988), (1018, 1023)}
    assert {r.inputs["referencedSecurityGroupId"] for r in rules} == {nodes_id, storage.id}
    assert all(r.inputs["securityGroupId"] == storage.id for r in rules)


def test_existing_network_creates_no_vpc(plan_spec, base_spec):
    base_spec["network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}}
    plan = plan_spec(base_spec)
    assert plan.of_type("aws:ec2/vpc:Vpc") == [] and plan.of_type("aws:ec2/subnet:Subnet") == []
    assert {r.inputs["vpcId"] for r in plan.of_type(SG)} == {"vpc-0123456789abcdef0"}
    fs = plan.named("demo-fsx-fs", "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["subnetIds"] == "subnet-0123456789abcdef0"


def test_node_role_is_least_privilege(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    role = plan.named("demo-compute-role", "aws:iam/role:Role").inputs
    assert '"Service": "ec2.amazonaws.com"' in role["assumeRolePolicy"]
    compute = plan.named("demo-compute-role", "aws:iam/role:Role")
    attachments = [r.inputs["policyArn"] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                   if r.inputs["role"] == compute.outputs["name"]]
    assert attachments == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
    # The only inline policies compute nodes get: reading the munge key and their own programs in the
    # configuration bucket (tests/aws/test_slurm_controller.py), and setting the one tag that says
    # why their set-up failed (tests/aws/test_power_iam.py), and writing metrics and logs to the
    # cluster's own workspace and log groups (tests/aws/test_observability_backend.py).
    inline = [r.name for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.inputs["role"] == compute.outputs["name"]]
    assert sorted(inline) == ["demo-compute-observability", "demo-slurm-compute-bootstrap-error",
                              "demo-slurm-compute-munge", "demo-slurm-node-files-compute-read"]


# ---------------------------------------------------------------- default group and flow logs
DEFAULT_SG = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def test_the_new_vpcs_default_security_group_allows_nothing(plan_spec, base_spec):
    """CIS AWS Foundations 5.4 (checkov CKV2_AWS_12): the VPC's default group is adopted with no rule,
    so the provider removes the default's allow-all-within-the-group ingress and allow-all egress."""
    plan = plan_spec(base_spec)
    (default,) = plan.of_type(DEFAULT_SG)
    assert default.inputs["vpcId"] == plan.named("demo-network-vpc", "aws:ec2/vpc:Vpc").id
    assert not default.inputs.get("ingress") and not default.inputs.get("egress")
    assert default.inputs["tags"]["aicluster-cluster"] == "demo"


def test_the_new_vpc_logs_every_flow_into_the_clusters_log_group(plan_spec, base_spec):
    """CIS 3.9 (checkov CKV2_AWS_11): ALL traffic, accepted and rejected, into /aicluster/<cluster>/
    vpc-flow-logs with aicluster's one retention, through the role made for it."""
    from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS

    plan = plan_spec(base_spec)
    (flow,) = plan.of_type(FLOW_LOG)
    group = plan.named("demo-network-flow-logs", LOG_GROUP)
    role = plan.named("demo-network-flow-logs", "aws:iam/role:Role")
    assert group.inputs["name"] == "/aicluster/demo/vpc-flow-logs"
    assert group.inputs["retentionInDays"] == LOG_RETENTION_DAYS
    assert flow.inputs["vpcId"] == plan.named("demo-network-vpc", "aws:ec2/vpc:Vpc").id
    assert flow.inputs["trafficType"] == "ALL"
    assert flow.inputs["logDestinationType"] == "cloud-watch-logs"
    assert flow.inputs["logDestination"] == group.outputs["arn"]
    assert flow.inputs["iamRoleArn"] == role.outputs["arn"]
    policy = plan.named("demo-network-flow-logs", "aws:iam/rolePolicy:RolePolicy")
    assert policy.urn in flow.dependencies      # the role delivers only once its policy is attached


def test_the_flow_log_role_is_least_privilege(plan_spec, base_spec):
    """Only vpc-flow-logs.amazonaws.com, for this account's flow logs, may assume it; it may create
    streams in, write to and describe the one group, nothing else and no `*` resource."""
    import json

    plan = plan_spec(base_spec)
    group_arn = plan.named("demo-network-flow-logs", LOG_GROUP).outputs["arn"]
    account = group_arn.split(":")[4]
    trust = json.loads(plan.named("demo-network-flow-logs", "aws:iam/role:Role").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": account}
    assert statement["Condition"]["ArnLike"]["aws:SourceArn"].endswith(f":{account}:vpc-flow-log/*")
    policy = json.loads(plan.named("demo-network-flow-logs", "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    (grant,) = policy["Statement"]
    assert grant["Effect"] == "Allow"
    assert sorted(grant["Action"]) == ["logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
                                       "logs:PutLogEvents"]
    assert grant["Resource"] == [group_arn, f"{group_arn}:log-stream:*"]


def test_an_existing_vpc_keeps_its_own_default_group_and_flow_logs(plan_spec, base_spec):
    base_spec["network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}}
    plan = plan_spec(base_spec)
    assert plan.of_type(DEFAULT_SG) == [] and plan.of_type(FLOW_LOG) == []


def test_flow_logs_can_be_turned_off_on_the_component(base_spec):
    """NetworkArgs.flow_logs=False: no flow log, no log group, no role for it; the default group
    is still emptied."""
    from aicluster.aws.network import Network, NetworkArgs
    from aicluster.design.cluster import design_cluster
    from aicluster.offline.engine import run_program
    from aicluster.spec.cluster import parse_spec

    design = design_cluster(parse_spec(base_spec))
    plan = run_program(lambda: Network("own", NetworkArgs(design.context, design.network, flow_logs=False)),
                       stack="own", config={"aws:region": "us-east-1"})
    assert plan.of_type(FLOW_LOG) == [] and plan.of_type(LOG_GROUP) == []
    assert plan.of_type("aws:iam/role:Role") == []
    assert len(plan.of_type(DEFAULT_SG)) == 1
    on = run_program(lambda: Network("own", NetworkArgs(design.context, design.network)),
                     stack="own", config={"aws:region": "us-east-1"})
    assert len(on.of_type(FLOW_LOG)) == 1


def test_flow_logs_follow_the_spec_on_both_clouds(plan_spec, base_spec):
    """spec network.flow_logs (default true): the AWS VPC's flow log, or the GCP nodes' subnet's
    log_config; false leaves both out."""
    assert len(plan_spec(base_spec).of_type(FLOW_LOG)) == 1
    base_spec["network"] = {"flow_logs": False}
    plan = plan_spec(base_spec)
    assert plan.of_type(FLOW_LOG) == [] and len(plan.of_type(DEFAULT_SG)) == 1
