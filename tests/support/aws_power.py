"""The AWS power program (aicluster/node/aws_power.py) as the tests import and run it, and
moto's EC2 + Route 53 server (the `moto_endpoint` fixture) set up the way the head node finds AWS:
the cluster's network, a launch template per pool and the private zone of node names.

Used by tests/scripts/test_power_programs.py, tests/scripts/test_power_faults_aws.py and
tests/slurm/test_reconcile_aws.py, so the three run the program against the same AWS.
"""
from __future__ import annotations

import os
import urllib.request
from dataclasses import dataclass

from tests.support import ROOT

REGION = "us-east-1"
# The credentials and settings boto3 needs to talk to moto and nothing else: no profile, no
# instance metadata (a test machine on EC2 would otherwise lend its own role).
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
KEYS = {"region_name": REGION, "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def load_power():
    """The program as a module (aicluster.node.aws_power): one module for every test file, so a
    test changes its constants with monkeypatch only (undone at teardown)."""
    from aicluster.node import aws_power

    return aws_power


def aws_env(endpoint: str) -> dict[str, str]:
    """The environment that points the program (boto3) at `endpoint`: moto, or a proxy in front of it."""
    return {**FAKE_AWS, "AWS_ENDPOINT_URL": endpoint}


def clients(endpoint: str):
    """(ec2, route53) straight to `endpoint`."""
    import boto3

    return (boto3.client("ec2", endpoint_url=endpoint, **KEYS), boto3.client("route53", endpoint_url=endpoint, **KEYS))


@dataclass
class MotoCluster:
    ec2: object
    route53: object
    vpc: str
    subnet: str
    image: str
    zone_id: str
    templates: dict[str, str]       # pool -> launch template id


def moto_cluster(endpoint: str, cluster: str, pools: dict[str, str], domain: str, *,
                 template_tags: bool = True) -> MotoCluster:
    """A fresh moto (reset) with the cluster's VPC and subnet, the private zone `domain` and a
    launch template per pool (pool -> instance type) that tags its instances with the cluster and
    pool, as the AWS component writes them. template_tags=False: a template without them, for a
    test of the tags CreateFleet itself puts on at launch."""
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
    ec2, route53 = clients(endpoint)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/17", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    zone_id = route53.create_hosted_zone(
        Name=domain, CallerReference=f"{cluster}-{os.getpid()}-{id(ec2)}", VPC={"VPCRegion": REGION, "VPCId": vpc},
        HostedZoneConfig={"Comment": "node names", "PrivateZone": True})["HostedZone"]["Id"].rsplit("/", 1)[-1]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    templates = {}
    for pool, instance_type in pools.items():
        labels = [{"Key": "aicluster-cluster", "Value": cluster}, {"Key": "aicluster-pool", "Value": pool}]
        data = {"ImageId": image, "InstanceType": instance_type,
                "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": subnet, "AssociatePublicIpAddress": False}]}
        if template_tags:
            data["TagSpecifications"] = [{"ResourceType": "instance", "Tags": labels}]
        templates[pool] = ec2.create_launch_template(LaunchTemplateName=f"{cluster}-{pool}",
                                                     LaunchTemplateData=data)["LaunchTemplate"]["LaunchTemplateId"]
    return MotoCluster(ec2, route53, vpc, subnet, image, zone_id, templates)
