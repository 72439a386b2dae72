"""The whole elastic path, with real programs end to end: a job submitted to a real slurmctld
makes it call the real ResumeProgram (aicluster-power.py), which launches the nodes through EC2
CreateFleet against moto's EC2 server, tags them with their node names, writes their names into
the cluster's Route 53 private zone (cloud_dns: node names must resolve) and hands their
addresses back to slurmctld with `scontrol update`."""
from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import boto3
import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support import stack_spec
from tests.support.node_programs import module_command
from tests.support.slurmctld import RECORDERS, Controller, fields, tool, wait_for

REGION = "us-east-1"


class ElasticController(Controller):
    """The real power programs for resume/suspend/resume-fail; a recorder for the prolog."""

    cluster_json: Path | None = None
    endpoint: str = ""

    def _write_recorders(self, bin_dir: Path) -> None:
        super()._write_recorders(bin_dir)
        scontrol = bin_dir / "scontrol-here"
        # The power program calls scontrol; this one talks to the test's private controller.
        scontrol.write_text(f'#!/bin/sh\nexport SLURM_CONF={self.conf}\nexec {tool("scontrol")} "$@"\n')
        scontrol.chmod(0o755)
        for prog, action in (("aicluster-resume", "resume"), ("aicluster-suspend", "suspend"),
                             ("aicluster-resume-fail", "resume-fail")):
            path = bin_dir / prog
            path.write_text(
                "#!/bin/sh\n"
                f'echo "$(basename "$0") $*" >> {self.calls}\n'
                f"export AICLUSTER_CONFIG={self.cluster_json} AICLUSTER_SCONTROL={scontrol} "
                f"AICLUSTER_LOG={self.root / 'power.log'} AICLUSTER_STATE_DIR={self.root / 'state'} "
                f"AWS_ENDPOINT_URL={self.endpoint} "
                f"AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION={REGION}\n"
                f'exec {" ".join(module_command("aws_power"))} {action} "$@"\n')
            path.chmod(0o755)
        assert set(RECORDERS) >= {"aicluster-resume", "aicluster-suspend", "aicluster-resume-fail"}


def moto_launch_template(endpoint: str, cluster: str) -> tuple[object, str, str]:
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/17", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    labels = [{"Key": "aicluster-cluster", "Value": cluster}, {"Key": "aicluster-pool", "Value": "gpu"}]
    template = ec2.create_launch_template(LaunchTemplateName=f"{cluster}-gpu", LaunchTemplateData={
        "ImageId": image, "InstanceType": "p5.48xlarge",
        "NetworkInterfaces": [{"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "interface",
                               "SubnetId": subnet, "AssociatePublicIpAddress": False}],
        "MetadataOptions": {"HttpTokens": "required", "InstanceMetadataTags": "enabled"},
        "TagSpecifications": [{"ResourceType": "instance", "Tags": labels}],
    })["LaunchTemplate"]["LaunchTemplateId"]
    return ec2, template, subnet


@pytest.fixture
def elastic(moto_endpoint, tmp_path):
    from aicluster.aws.slurm import published_files

    from aicluster.render.slurm_config import node_domain

    design = design_cluster(parse_spec(stack_spec("aws-p5-slurm")))
    ec2, template, subnet = moto_launch_template(moto_endpoint, design.name)
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    route53 = boto3.client("route53", region_name=REGION, endpoint_url=moto_endpoint,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    zone_id = route53.create_hosted_zone(
        Name=node_domain(design.name), CallerReference=design.name, VPC={"VPCRegion": REGION, "VPCId": vpc},
        HostedZoneConfig={"Comment": "node names", "PrivateZone": True})["HostedZone"]["Id"].rsplit("/", 1)[-1]
    files = published_files(design, controller_addr="127.0.0.1", subnet_id=subnet,
                            launch_templates={"gpu": template}, placement_groups={"gpu": None},
                            accounting_secret=None, hosted_zone_id=zone_id)
    cluster_json = tmp_path / "cluster.json"
    cluster_json.write_text(files["aicluster/cluster.json"])
    controller = ElasticController("elastic", design, tmp_path / "slurm")
    controller.cluster_json, controller.endpoint = cluster_json, moto_endpoint
    try:
        controller.start()
        yield controller, ec2, template, route53
    finally:
        controller.stop()


def test_job_launches_tagged_nodes_through_ec2_and_slurm_learns_their_addresses(elastic):
    ctl, ec2, template, route53 = elastic
    ctl.run("sbatch", "-N", "2", "-p", "gpu", "-o", str(ctl.root / "job-%j.out"), "--wrap", "hostname")

    def launched():
        reservations = ec2.describe_instances(Filters=[
            {"Name": "tag:aicluster-cluster", "Values": ["p5-train"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def named():
        return {t["Value"]: i for i in launched() for t in i.get("Tags", []) if t["Key"] == "aicluster-node"}

    wait_for("two instances tagged gpu-1 and gpu-2 in moto", lambda: set(named()) == {"gpu-1", "gpu-2"},
             60, ctl.diagnostics)
    instances = named()
    for node, instance in instances.items():
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags["aicluster-pool"] == "gpu"
        assert instance["InstanceType"] == "p5.48xlarge"   # from the pool's launch template

    def addresses():
        return {n: fields(ctl.run("scontrol", "-o", "show", "node", n)).get("NodeAddr") for n in instances}

    wait_for("slurmctld to learn the nodes' addresses",
             lambda: all(addresses()[n] == instances[n]["PrivateIpAddress"] for n in instances), 60, ctl.diagnostics)
    # Every node name resolves to the address slurmctld has: an A record per node of the job.
    config = json.loads(ctl.cluster_json.read_text())
    assert config["dns_domain"] == "p5-train.aicluster.internal"
    records = route53.list_resource_record_sets(HostedZoneId=config["hosted_zone_id"])["ResourceRecordSets"]
    assert {r["Name"]: [v["Value"] for v in r["ResourceRecords"]] for r in records if r["Type"] == "A"} == {
        f"{n}.p5-train.aicluster.internal.": [i["PrivateIpAddress"]] for n, i in instances.items()}
    log = (ctl.root / "power.log").read_text()
    assert re.search(r"gpu-\[?1", log), log
    assert json.loads(ctl.cluster_json.read_text())["pools"]["gpu"]["launch_template_id"] == template
    fleets = ec2.describe_fleets()["Fleets"]
    assert [c["LaunchTemplateSpecification"]["LaunchTemplateId"]
            for f in fleets for c in f["LaunchTemplateConfigs"]] == [template]
