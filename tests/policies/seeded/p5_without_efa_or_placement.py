"""Seeded case: a hand-written multi-node p5 stack with no placement group and no EFA.

Plain pulumi_aws, as someone writes it without aicluster: one ENA interface per node, an
autoscaling group of 8, a decent FSx. `aicluster check` must fail it on AIC-NET-001 (no EFA device
on any of the 32 cards) and AIC-NET-002 (no cluster placement group).
"""
import pulumi_aws as aws

tags = {"aicluster-cluster": "handmade", "aicluster-role": "compute"}
vpc = aws.ec2.Vpc("handmade", cidr_block="10.20.0.0/16", tags=tags)
subnet = aws.ec2.Subnet("handmade-private", vpc_id=vpc.id, cidr_block="10.20.0.0/20", availability_zone="us-east-1a",
                        tags=tags)
nodes = aws.ec2.SecurityGroup(
    "handmade-nodes", vpc_id=vpc.id, description="nodes",
    ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)],
    egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])],
    tags=tags)
template = aws.ec2.LaunchTemplate(
    "handmade-p5",
    instance_type="p5.48xlarge",
    image_id="ami-0123456789abcdef0",
    network_interfaces=[aws.ec2.LaunchTemplateNetworkInterfaceArgs(
        device_index=0, subnet_id=subnet.id, security_groups=[nodes.id], associate_public_ip_address="false")],
    metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required"),
    block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name="/dev/sda1", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(volume_size=200, encrypted="true"))],
    tags=tags)
aws.autoscaling.Group(
    "handmade-p5", min_size=0, max_size=8, vpc_zone_identifiers=[subnet.id],
    launch_template=aws.autoscaling.GroupLaunchTemplateArgs(id=template.id, version="$Latest"),
    tags=[aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True) for k, v in tags.items()])
storage = aws.ec2.SecurityGroup("handmade-storage", vpc_id=vpc.id, description="lustre", tags=tags)
aws.fsx.LustreFileSystem(
    "handmade-fsx", deployment_type="PERSISTENT_2", storage_capacity=9600, per_unit_storage_throughput=500,
    subnet_ids=subnet.id, security_group_ids=[storage.id], tags={**tags, "aicluster-role": "storage"},
    opts=__import__("pulumi").ResourceOptions(protect=True, retain_on_delete=True))
