"""Hand-written stacks for the policy tests: plain pulumi_aws / pulumi_gcp resources, written the way a
user writes a Pulumi program without aicluster (no aicluster spec, no aicluster components).

Each test builds a program from these pieces, runs it under the offline engine (the real Pulumi SDK
against the fake cloud) and runs one rule of the pack through the policy bridge, so the rule sees
exactly the wire properties a `pulumi preview` would hand it.
"""
from __future__ import annotations

import base64
from typing import Callable, Mapping

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

from aicluster.catalog import load_catalog
from aicluster.offline.engine import run_program
from aicluster.offline.policy_bridge import Verdict, load_rules, resolve_config, run_policies

TAGS = {"aicluster-cluster": "hw", "aicluster-role": "compute", "team": "ml"}
ZONE = "us-east-1a"


# ---------------------------------------------------------------- running a rule


def rule(rule_id: str):
    for module in load_rules():
        if module.POLICY.name == rule_id:
            return module
    raise KeyError(rule_id)


def check(rule_id: str, program: Callable[[], None], config: Mapping | None = None) -> Verdict:
    """Plan `program` offline and run one rule over it with the pack defaults plus `config`."""
    module = rule(rule_id)
    plan = run_program(program, stack="handwritten", config={"aws:region": "us-east-1"})
    resolved = resolve_config([module.POLICY], {rule_id: dict(config)} if config else None)
    (verdict,) = run_policies(plan, resolved, rules=[module])
    return verdict


def messages(verdict: Verdict) -> str:
    return "\n".join(v.message for v in verdict.violations)


# ---------------------------------------------------------------- AWS pieces


def network(name: str = "hw", zone: str = ZONE, *, efa_self: bool = True, inline: bool = True):
    """A VPC, a private subnet and the nodes' security group (all traffic within the group)."""
    vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block="10.0.0.0/16", tags={**TAGS, "aicluster-role": "network"})
    subnet = aws.ec2.Subnet(f"{name}-private", vpc_id=vpc.id, cidr_block="10.0.0.0/20", availability_zone=zone,
                            tags={**TAGS, "aicluster-role": "network"})
    if inline:
        sg = aws.ec2.SecurityGroup(
            f"{name}-nodes", vpc_id=vpc.id, description="nodes",
            ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)] if efa_self else [],
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True)] if efa_self else
            [aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])],
            tags=TAGS)
    else:
        sg = aws.ec2.SecurityGroup(f"{name}-nodes", vpc_id=vpc.id, description="nodes", tags=TAGS)
    return vpc, subnet, sg


def efa_interfaces(instance_type: str, subnet, sg, *, layout: str = "efa-only", cards: int | None = None,
                   public: str = "false") -> list:
    """The launch template interfaces: current layout (ENA primary + efa-only) or the older all-efa one."""
    it = load_catalog().find(instance_type)
    efa_cards = list(it.efa_cards)[:cards] if cards is not None else list(it.efa_cards)
    nics = []
    if layout == "efa-only":
        nics.append(aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=0, device_index=0, interface_type="interface", subnet_id=subnet.id,
            security_groups=[sg.id], associate_public_ip_address=public, delete_on_termination="true"))
        for card in efa_cards:
            nics.append(aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=card, device_index=1 if card == 0 else 0, interface_type="efa-only",
                subnet_id=subnet.id, security_groups=[sg.id], associate_public_ip_address="false",
                delete_on_termination="true"))
    elif layout == "efa":
        for card in efa_cards:
            nics.append(aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=card, device_index=0 if card == 0 else 1, interface_type="efa",
                subnet_id=subnet.id, security_groups=[sg.id], associate_public_ip_address=public if card == 0 else "false",
                delete_on_termination="true"))
    else:   # plain ENA only
        nics.append(aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            device_index=0, subnet_id=subnet.id, security_groups=[sg.id], associate_public_ip_address=public))
    return nics


def launch_template(name: str, subnet, sg, *, instance_type: str = "p5.48xlarge", layout: str = "efa-only",
                    cards: int | None = None, placement_group=None, zone: str | None = ZONE,
                    tags: Mapping[str, str] | None = None, http_tokens: str | None = "required",
                    encrypted: str | None = "true", user_data: str | None = None, public: str = "false",
                    reservation: str | None = None, market: str | None = None):
    return aws.ec2.LaunchTemplate(
        name,
        instance_type=instance_type,
        image_id="ami-0123456789abcdef0",
        network_interfaces=efa_interfaces(instance_type, subnet, sg, layout=layout, cards=cards, public=public),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint="enabled", http_tokens=http_tokens)
        if http_tokens else None,
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name="/dev/sda1",
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(volume_size=200, volume_type="gp3", encrypted=encrypted))],
        placement=aws.ec2.LaunchTemplatePlacementArgs(
            availability_zone=zone, group_name=placement_group.name if placement_group is not None else None)
        if (zone or placement_group is not None) else None,
        capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=reservation)) if reservation else None,
        instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type=market) if market else None,
        user_data=base64.b64encode(user_data.encode()).decode() if user_data else None,
        tags=dict(TAGS if tags is None else tags),
    )


def placement_group(name: str = "hw-pg", strategy: str = "cluster"):
    return aws.ec2.PlacementGroup(name, strategy=strategy, tags=TAGS)


def autoscaling_group(name: str, template, subnet, *, max_size: int, placement=None, overrides: list[str] | None = None):
    if overrides:
        return aws.autoscaling.Group(
            name, max_size=max_size, min_size=0, vpc_zone_identifiers=[subnet.id],
            placement_group=placement.name if placement is not None else None,
            mixed_instances_policy=aws.autoscaling.GroupMixedInstancesPolicyArgs(
                launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
                    launch_template_specification=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                        launch_template_id=template.id),
                    overrides=[aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(instance_type=t)
                               for t in overrides])))
    return aws.autoscaling.Group(
        name, max_size=max_size, min_size=0, vpc_zone_identifiers=[subnet.id],
        placement_group=placement.name if placement is not None else None,
        launch_template=aws.autoscaling.GroupLaunchTemplateArgs(id=template.id, version="$Latest"),
        tags=[aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True) for k, v in TAGS.items()])


def instance(name: str, subnet, sg, *, instance_type: str = "p5.48xlarge", tags: Mapping[str, str] | None = None,
             http_tokens: str | None = "required", public: bool = False, placement=None,
             root_encrypted: bool | None = True, user_data: str | None = None):
    return aws.ec2.Instance(
        name, ami="ami-0123456789abcdef0", instance_type=instance_type, subnet_id=subnet.id,
        vpc_security_group_ids=[sg.id], associate_public_ip_address=public,
        placement_group=placement.name if placement is not None else None,
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens=http_tokens) if http_tokens else None,
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(volume_size=200, encrypted=root_encrypted)
        if root_encrypted is not None else None,
        user_data=user_data,
        tags=dict(TAGS if tags is None else tags))


def fsx(name: str, subnet, sg, *, capacity: int = 24000, throughput: int | None = 500,
        deployment: str = "PERSISTENT_2", protect: bool = True, retain: bool = True,
        tags: Mapping[str, str] | None = None, **extra):
    return aws.fsx.LustreFileSystem(
        name, deployment_type=deployment, storage_capacity=capacity, per_unit_storage_throughput=throughput,
        subnet_ids=subnet.id, security_group_ids=[sg.id],
        tags=dict({**TAGS, "aicluster-role": "storage"} if tags is None else tags),
        opts=pulumi.ResourceOptions(protect=protect, retain_on_delete=retain), **extra)


def efa_cluster(name: str = "hw", *, nodes: int = 4, instance_type: str = "p5.48xlarge", capacity: int = 24000,
                throughput: int = 500, model_b: float | None = None, fs_zone: str = ZONE,
                lt_tags: Mapping[str, str] | None = None) -> None:
    """A complete, balanced hand-written EFA cluster: network, cluster placement group, a launch
    template wiring every EFA device, an autoscaling group of `nodes`, and FSx for Lustre."""
    _, subnet, sg = network(name)
    pg = placement_group(f"{name}-pg")
    tags = dict(TAGS if lt_tags is None else lt_tags)
    if model_b is not None:
        tags["aicluster-model-params-b"] = f"{model_b:g}"
    lt = launch_template(f"{name}-lt", subnet, sg, instance_type=instance_type, placement_group=pg, tags=tags)
    autoscaling_group(f"{name}-asg", lt, subnet, max_size=nodes, placement=pg)
    if fs_zone != ZONE:
        vpc2 = aws.ec2.Vpc(f"{name}-vpc-fs", cidr_block="10.1.0.0/16", tags=TAGS)
        subnet = aws.ec2.Subnet(f"{name}-fs-subnet", vpc_id=vpc2.id, cidr_block="10.1.0.0/20",
                                availability_zone=fs_zone, tags=TAGS)
    fsx(f"{name}-fsx", subnet, sg, capacity=capacity, throughput=throughput)


# ---------------------------------------------------------------- GCP pieces


def gcp_network(name: str = "hw"):
    net = gcp.compute.Network(f"{name}-net", auto_create_subnetworks=False)
    sub = gcp.compute.Subnetwork(f"{name}-sub", network=net.id, ip_cidr_range="10.128.0.0/20", region="us-central1")
    return net, sub


def compact_policy(name: str = "hw-compact", collocation: str = "COLLOCATED"):
    return gcp.compute.ResourcePolicy(name, region="us-central1",
                                      group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                                          collocation=collocation, vm_count=2))


def gce_instance(name: str, sub, *, machine_type: str = "a3-megagpu-8g", gpu_nics: int = 8, policy=None,
                 public: bool = False, labels: Mapping[str, str] | None = None, metadata: Mapping[str, str] | None = None,
                 zone: str = "us-central1-a"):
    nics = [gcp.compute.InstanceNetworkInterfaceArgs(
        subnetwork=sub.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()] if public else None)]
    nics += [gcp.compute.InstanceNetworkInterfaceArgs(subnetwork=sub.id, nic_type="GVNIC") for _ in range(gpu_nics)]
    return gcp.compute.Instance(
        name, machine_type=machine_type, zone=zone,
        boot_disk=gcp.compute.InstanceBootDiskArgs(initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
            image="projects/debian-cloud/global/images/family/debian-12")),
        network_interfaces=nics, resource_policies=policy.self_link if policy is not None else None,   # a string in pulumi_gcp 10
        labels=dict(labels if labels is not None else {"aicluster-cluster": "hw", "aicluster-role": "compute",
                                                        "aicluster-pool": "gpu"}),
        metadata=dict(metadata) if metadata else None)


# ---------------------------------------------------------------- databases (a hand-written slurmdbd database)


def rds_parameter_group(name: str = "hw-db-params", *, tls: str | None = "1", family: str = "mariadb10.11"):
    """A DB parameter group with Slurm's setting; `tls` is require_secure_transport's value (None: not set)."""
    parameters = [aws.rds.ParameterGroupParameterArgs(name="innodb_lock_wait_timeout", value="900")]
    if tls is not None:
        parameters.append(aws.rds.ParameterGroupParameterArgs(name="require_secure_transport", value=tls))
    return aws.rds.ParameterGroup(name, name=name, family=family, parameters=parameters, tags=TAGS)


def rds_instance(name: str, subnet, sg, *, parameter_group=None, public: bool | None = False,
                 encrypted: bool | None = True, engine: str = "mariadb", engine_version: str = "10.11",
                 protect: bool = True, retain: bool = True):
    """An RDS instance in a DB subnet group; `parameter_group` is a ParameterGroup, a group's name or None."""
    subnets = aws.rds.SubnetGroup(f"{name}-subnets", name=f"{name}-subnets", subnet_ids=[subnet.id], tags=TAGS)
    group = parameter_group.name if isinstance(parameter_group, aws.rds.ParameterGroup) else parameter_group
    return aws.rds.Instance(
        name, identifier=name, engine=engine, engine_version=engine_version, instance_class="db.t4g.medium",
        allocated_storage=20, storage_type="gp3", storage_encrypted=encrypted, username="slurm",
        password=pulumi.Output.secret("not-a-real-password"), db_subnet_group_name=subnets.name,
        vpc_security_group_ids=[sg.id], parameter_group_name=group, publicly_accessible=public,
        skip_final_snapshot=True, tags=TAGS, opts=pulumi.ResourceOptions(protect=protect, retain_on_delete=retain))


def cloud_sql(name: str, net, *, ipv4: bool | None = False, ssl_mode: str | None = "ENCRYPTED_ONLY",
              protect: bool = True, retain: bool = True, database_protect: bool = True):
    """A Cloud SQL for MySQL instance on the VPC's private IP and its database (slurmdbd's)."""
    instance = gcp.sql.DatabaseInstance(
        name, name=name, region="us-central1", database_version="MYSQL_8_0", deletion_protection=True,
        settings=gcp.sql.DatabaseInstanceSettingsArgs(
            tier="db-custom-1-3840",
            ip_configuration=gcp.sql.DatabaseInstanceSettingsIpConfigurationArgs(
                ipv4_enabled=ipv4, private_network=net.id, ssl_mode=ssl_mode)),
        opts=pulumi.ResourceOptions(protect=protect, retain_on_delete=retain))
    gcp.sql.Database(f"{name}-database", name="slurm_acct_db", instance=instance.name,
                     opts=pulumi.ResourceOptions(protect=database_protect, retain_on_delete=database_protect))
    return instance


def forty_resources() -> None:
    """A VPC and 13 x (subnet, security group, instance): the offline engine's test of capture and
    wiring (tests/offline) and its benchmark (bench/offline_engine.py) run this same program."""
    vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
    for i in range(13):
        subnet = aws.ec2.Subnet(f"s{i}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24")
        sg = aws.ec2.SecurityGroup(f"sg{i}", vpc_id=vpc.id, description="efa")
        aws.ec2.Instance(f"i{i}", instance_type="m7i.large", subnet_id=subnet.id,
                         vpc_security_group_ids=[sg.id], ami="ami-0123456789abcdef0")
