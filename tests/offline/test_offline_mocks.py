"""FakeCloud on its own: deterministic, realistic state for the types the programs use."""
from __future__ import annotations

import asyncio
import base64
import contextvars
import ipaddress
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi.runtime import MockCallArgs, MockResourceArgs

from aicluster.offline import FakeCloud, OfflineInvokeError, Secret
from aicluster.offline.capture import (
    SECRET_SIG,
    SIG_KEY,
    plain_to_struct,
    redact,
    reveal,
    struct_to_plain,
)

ACCOUNT = "123456789012"


def create(cloud: FakeCloud, typ: str, res_name: str, /, **inputs):
    return cloud.new_resource(MockResourceArgs(typ=typ, name=res_name, inputs=inputs, custom=True))


@pytest.mark.parametrize("typ, inputs, id_pattern", [
    ("aws:ec2/vpc:Vpc", {"cidrBlock": "10.0.0.0/16"}, r"vpc-[0-9a-f]{17}"),
    ("aws:ec2/subnet:Subnet", {"cidrBlock": "10.0.1.0/24"}, r"subnet-[0-9a-f]{17}"),
    ("aws:ec2/internetGateway:InternetGateway", {}, r"igw-[0-9a-f]{17}"),
    ("aws:ec2/eip:Eip", {}, r"eipalloc-[0-9a-f]{17}"),
    ("aws:ec2/natGateway:NatGateway", {}, r"nat-[0-9a-f]{17}"),
    ("aws:ec2/routeTable:RouteTable", {}, r"rtb-[0-9a-f]{17}"),
    ("aws:ec2/routeTableAssociation:RouteTableAssociation", {}, r"rtbassoc-[0-9a-f]{17}"),
    ("aws:ec2/vpcEndpoint:VpcEndpoint", {}, r"vpce-[0-9a-f]{17}"),
    ("aws:ec2/securityGroup:SecurityGroup", {}, r"sg-[0-9a-f]{17}"),
    ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", {}, r"sgr-[0-9a-f]{17}"),
    ("aws:ec2/launchTemplate:LaunchTemplate", {}, r"lt-[0-9a-f]{17}"),
    ("aws:ec2/instance:Instance", {}, r"i-[0-9a-f]{17}"),
    ("aws:fsx/lustreFileSystem:LustreFileSystem", {}, r"fs-[0-9a-f]{17}"),
    ("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", {}, r"dra-[0-9a-f]{17}"),
    ("aws:ec2/placementGroup:PlacementGroup", {"name": "pg-a"}, r"pg-a"),
    ("aws:iam/role:Role", {"name": "node"}, r"node"),
    ("aws:ssm/parameter:Parameter", {"name": "/a/b"}, r"/a/b"),
    ("aws:s3/bucketV2:BucketV2", {"bucket": "data"}, r"data"),
    ("aws:kms/key:Key", {}, r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}"),
    ("aws:some/newThing:NewThing", {"x": 1}, r"newthing-[0-9a-f]{12}"),
])
def test_id_shapes(typ, inputs, id_pattern):
    rid, state = create(FakeCloud(), typ, "res", **inputs)
    assert re.fullmatch(id_pattern, rid), rid
    assert state.items() >= inputs.items()  # inputs are echoed into state


@settings(max_examples=50, deadline=None)
@given(name=st.text(min_size=1, max_size=30))
def test_ids_are_a_pure_function_of_type_and_name(name):
    a = create(FakeCloud(), "aws:ec2/vpc:Vpc", name)
    b = create(FakeCloud(), "aws:ec2/vpc:Vpc", name)
    assert a == b
    assert re.fullmatch(r"vpc-[0-9a-f]{17}", a[0])
    assert create(FakeCloud(), "aws:ec2/vpc:Vpc", name + "x")[0] != a[0]


def test_same_type_and_name_twice_in_one_cloud_gets_distinct_ids():
    cloud = FakeCloud()
    assert create(cloud, "aws:ec2/vpc:Vpc", "v")[0] != create(cloud, "aws:ec2/vpc:Vpc", "v")[0]


def test_region_from_config_and_private_dns():
    rid, east = create(FakeCloud(), "aws:ec2/instance:Instance", "head")
    assert east["privateDns"] == "ip-" + east["privateIp"].replace(".", "-") + ".ec2.internal"
    assert ipaddress.ip_address(east["privateIp"]) in ipaddress.ip_network("10.0.0.0/16")
    assert re.fullmatch(r"eni-[0-9a-f]{17}", east["primaryNetworkInterfaceId"])
    assert east["arn"] == f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{rid}"
    _, west = create(FakeCloud({"aws:region": "us-west-2"}), "aws:ec2/instance:Instance", "head")
    assert west["privateDns"].endswith(".us-west-2.compute.internal")


def test_instance_ip_inside_known_subnet():
    cloud = FakeCloud()
    subnet_id, _ = create(cloud, "aws:ec2/subnet:Subnet", "s", cidrBlock="172.31.64.0/20")
    _, inst = create(cloud, "aws:ec2/instance:Instance", "i", subnetId=subnet_id)
    assert ipaddress.ip_address(inst["privateIp"]) in ipaddress.ip_network("172.31.64.0/20")


def test_eip_nat_and_endpoint():
    cloud = FakeCloud()
    eip_id, eip = create(cloud, "aws:ec2/eip:Eip", "eip")
    assert eip["allocationId"] == eip_id
    assert ipaddress.ip_address(eip["publicIp"]) in ipaddress.ip_network("198.51.100.0/24")
    _, nat = create(cloud, "aws:ec2/natGateway:NatGateway", "nat", allocationId=eip_id)
    assert nat["publicIp"] == eip["publicIp"] and nat["privateIp"].startswith("10.0.")
    _, vpce = create(cloud, "aws:ec2/vpcEndpoint:VpcEndpoint", "s3", vpcEndpointType="Gateway")
    assert re.fullmatch(r"pl-[0-9a-f]{8}", vpce["prefixListId"])


def test_iam_secrets_and_lustre_shapes():
    cloud = FakeCloud({"aws:region": "eu-west-1"})
    _, role = create(cloud, "aws:iam/role:Role", "node")
    assert role["arn"] == f"arn:aws:iam::{ACCOUNT}:role/node"
    assert re.fullmatch(r"AROA[A-Z2-7]{17}", role["uniqueId"])
    sid, secret = create(cloud, "aws:secretsmanager/secret:Secret", "munge", name="c/munge")
    assert sid == secret["arn"]
    assert re.fullmatch(rf"arn:aws:secretsmanager:eu-west-1:{ACCOUNT}:secret:c/munge-[A-Za-z0-9]{{6}}", sid)
    _, version = create(cloud, "aws:secretsmanager/secretVersion:SecretVersion", "v", secretId=sid)
    assert re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}", version["versionId"])
    fid, fs = create(cloud, "aws:fsx/lustreFileSystem:LustreFileSystem", "fs")
    assert fs["dnsName"] == f"{fid}.fsx.eu-west-1.amazonaws.com"
    assert re.fullmatch(r"[a-z0-9]{8}", fs["mountName"]) and fs["ownerId"] == ACCOUNT
    assert all(re.fullmatch(r"eni-[0-9a-f]{17}", e) for e in fs["networkInterfaceIds"])


def test_placement_group_and_launch_template():
    cloud = FakeCloud()
    pid, pg = create(cloud, "aws:ec2/placementGroup:PlacementGroup", "pg", name="gpu-pg", strategy="cluster")
    assert pid == "gpu-pg" and re.fullmatch(r"pg-[0-9a-f]{17}", pg["placementGroupId"])
    assert pg["arn"] == f"arn:aws:ec2:us-east-1:{ACCOUNT}:placement-group/gpu-pg"
    _, lt = create(cloud, "aws:ec2/launchTemplate:LaunchTemplate", "lt")
    assert lt["latestVersion"] == 1 and lt["defaultVersion"] == 1


def test_eks_cluster():
    _, eks = create(FakeCloud({"aws:region": "us-east-2"}), "aws:eks/cluster:Cluster", "k")
    assert re.fullmatch(r"https://[0-9A-F]{32}\.gr7\.us-east-2\.eks\.amazonaws\.com", eks["endpoint"])
    pem = base64.b64decode(eks["certificateAuthority"]["data"]).decode()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    assert eks["identities"][0]["oidcs"][0]["issuer"].startswith("https://oidc.eks.us-east-2.amazonaws.com/id/")


def test_random_provider():
    cloud = FakeCloud()
    _, pw = create(cloud, "random:index/randomPassword:RandomPassword", "pw", length=40, special=False)
    assert len(pw["result"]) == 40 and pw["result"].isalnum()
    assert pw == create(FakeCloud(), "random:index/randomPassword:RandomPassword", "pw", length=40, special=False)[1]
    assert create(FakeCloud(), "random:index/randomPassword:RandomPassword", "other", length=40)[1]["result"] != pw["result"]
    _, rid = create(cloud, "random:index/randomId:RandomId", "id", byteLength=4)
    assert re.fullmatch(r"[0-9a-f]{8}", rid["hex"])
    assert base64.b64decode(rid["b64Std"]) == bytes.fromhex(rid["hex"])
    _, rb = create(cloud, "random:index/randomBytes:RandomBytes", "b", length=16)
    assert base64.b64decode(rb["base64"]).hex() == rb["hex"] and len(rb["hex"]) == 32


def test_gcp_shapes():
    cloud = FakeCloud({"gcp:project": "proj", "gcp:region": "europe-west4"})
    nid, net = create(cloud, "gcp:compute/network:Network", "net")
    assert nid == "projects/proj/global/networks/net"
    assert net["selfLink"] == "https://www.googleapis.com/compute/v1/projects/proj/global/networks/net"
    _, sub = create(cloud, "gcp:compute/subnetwork:Subnetwork", "sub", name="gpu", ipCidrRange="10.8.0.0/20")
    assert sub["selfLink"].endswith("/projects/proj/regions/europe-west4/subnetworks/gpu")
    assert sub["gatewayAddress"] == "10.8.0.1"
    _, vm = create(cloud, "gcp:compute/instance:Instance", "vm",
                   networkInterfaces=[{"subnetwork": sub["selfLink"]}, {}])
    assert ipaddress.ip_address(vm["networkInterfaces"][0]["networkIp"]) in ipaddress.ip_network("10.8.0.0/20")
    assert len(vm["networkInterfaces"]) == 2 and vm["instanceId"].isdigit()
    _, sa = create(cloud, "gcp:serviceaccount/account:Account", "sa", accountId="nodes")
    assert sa["email"] == "nodes@proj.iam.gserviceaccount.com"
    _, lustre = create(cloud, "gcp:lustre/instance:Instance", "l", filesystem="scratch", instanceId="l1")
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+@tcp:/scratch", lustre["mountPoint"])
    _, secret = create(cloud, "gcp:secretmanager/secret:Secret", "s", secretId="munge")
    assert secret["name"] == "projects/proj/secrets/munge"
    _, tmpl = create(cloud, "gcp:compute/instanceTemplate:InstanceTemplate", "t")
    assert tmpl["selfLinkUnique"].startswith(tmpl["selfLink"] + "?uniqueId=")
    _, gke = create(cloud, "gcp:container/cluster:Cluster", "gke")
    assert ipaddress.ip_address(gke["endpoint"])
    assert base64.b64decode(gke["masterAuth"]["clusterCaCertificate"]).startswith(b"-----BEGIN")
    _, fstore = create(cloud, "gcp:filestore/instance:Instance", "f", networks=[{"network": "n"}])
    assert ipaddress.ip_address(fstore["networks"][0]["ipAddresses"][0])
    _, tpu = create(cloud, "gcp:tpu/v2Vm:V2Vm", "tpu", acceleratorType="v5p-32")
    assert len(tpu["networkEndpoints"]) == 4


def test_gcp_defaults():
    _, net = create(FakeCloud(), "gcp:compute/network:Network", "net")
    assert "/projects/aicluster-demo/" in net["selfLink"]


def test_calls():
    cloud = FakeCloud({"aws:region": "ap-northeast-1"})
    azs, failures = cloud.call(MockCallArgs("aws:index/getAvailabilityZones:getAvailabilityZones", {}, ""))
    assert failures == []
    assert azs["names"] == [f"ap-northeast-1{c}" for c in "abcd"]
    assert azs["zoneIds"][0] == "apne1-az1"
    ident, _ = cloud.call(MockCallArgs("aws:index/getCallerIdentity:getCallerIdentity", {}, ""))
    assert ident["accountId"] == ACCOUNT and ident["arn"].startswith("arn:aws:iam::123456789012:")
    region, _ = cloud.call(MockCallArgs("aws:index/getRegion:getRegion", {}, ""))
    assert region["name"] == region["region"] == "ap-northeast-1"
    with pytest.raises(OfflineInvokeError) as caught:
        cloud.call(MockCallArgs("aws:ec2/getAmi:getAmi", {}, ""))
    assert "aws:ec2/getAmi:getAmi" in str(caught.value) and "must not depend on invokes" in str(caught.value)


def test_secret_inputs_are_revealed_to_the_cloud():
    rpc_wrapped = {SIG_KEY: SECRET_SIG, "value": "s3cret"}
    _, state = create(FakeCloud(), "aws:ssm/parameter:Parameter", "p", value=rpc_wrapped, other=Secret("x"))
    assert state["value"] == "s3cret" and state["other"] == "x"


def test_struct_round_trip_keeps_secrets_and_ints():
    value = {"b": [1, 2.5, None, True], "a": {"s": Secret({"k": "v"})}, "n": 3}
    back = struct_to_plain(plain_to_struct(value))
    assert back == value and type(back["n"]) is int and list(back) == ["a", "b", "n"]
    assert redact(back) == {"a": {"s": "[secret]"}, "b": [1, 2.5, None, True], "n": 3}
    assert reveal(back)["a"]["s"] == {"k": "v"}


def test_fake_cloud_works_under_plain_sdk_set_mocks():
    """Other tests may use pulumi.runtime.set_mocks(FakeCloud(...)) + @pulumi.runtime.test."""
    import pulumi
    import pulumi_aws as aws
    from aicluster.offline import engine

    result: dict = {}

    def body():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        pulumi.runtime.set_mocks(FakeCloud({"aws:region": "us-west-2"}), preview=False)

        @pulumi.runtime.test
        def check():
            vpc = aws.ec2.Vpc("v", cidr_block="10.0.0.0/16")
            return pulumi.Output.all(vpc.id, vpc.arn).apply(lambda xs: result.update(id=xs[0], arn=xs[1]))

        try:
            check()
        finally:
            loop.close()

    props = engine._context_properties()
    defaults = [p._ContextProperty__default for p in props]
    thread = threading.Thread(target=lambda: contextvars.Context().run(body))
    try:
        thread.start()
        thread.join()
    finally:  # set_mocks leaks its settings into the SDK's process-wide defaults
        for p, d in zip(props, defaults):
            p._ContextProperty__default = d
    assert re.fullmatch(r"vpc-[0-9a-f]{17}", result["id"])
    assert result["arn"] == f"arn:aws:ec2:us-west-2:{ACCOUNT}:vpc/{result['id']}"
