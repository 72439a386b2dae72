"""The Slurm resume/suspend programs (aicluster/node/aws_power.py, installed as aicluster-power.py).

They run as slurmctld runs them: a subprocess through the aicluster-resume/-suspend/-resume-fail
links, against moto's EC2 and Route 53 server on loopback, with a recording `scontrol`. Capacity
errors and refused DNS changes come from botocore's Stubber, in process, since moto always has
capacity.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import ANY, Stubber

from tests.support import node_programs
from tests.support.aws_power import REGION, aws_env, load_power
from tests.support.scontrol_recorder import calls, recorder

CLUSTER = "p5-train"
DOMAIN = "p5-train.aicluster.internal"

power = load_power()
SCRIPT = Path(power.__file__)


def installed(tmp_path: Path) -> Path:
    """aicluster-power.py as the head has it: the entry point, aicluster.node beside it."""
    node_programs.install(tmp_path / "opt" / "bin", ["aicluster-power.py"])
    return tmp_path / "opt" / "bin" / "aicluster-power.py"


# --- the file itself -------------------------------------------------------------------------


def test_compiles_with_python3(tmp_path):
    python = shutil.which("python3") or sys.executable
    subprocess.run([python, "-m", "py_compile", str(SCRIPT)], check=True,
                   env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)})


def test_imports_only_stdlib_and_boto():
    tree = ast.parse(SCRIPT.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    third_party = {r for r in roots if r not in sys.stdlib_module_names} - {"__future__"}
    assert third_party <= {"boto3", "botocore", "aicluster"}, third_party
    assert {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("aicluster")} == {"aicluster.node", "aicluster.node.slurm"}   # the shared core


# --- hostlists -------------------------------------------------------------------------------

EXPANSIONS = {
    "gpu-1": ["gpu-1"],
    "gpu-[3-5,9],infer-1": ["gpu-3", "gpu-4", "gpu-5", "gpu-9", "infer-1"],
    "gpu-[08-10,3]": ["gpu-08", "gpu-09", "gpu-10", "gpu-3"],
    "gpu-[9-11]": ["gpu-9", "gpu-10", "gpu-11"],
    "gpu-[001-3]": ["gpu-001", "gpu-002", "gpu-003"],
    "gpu-[1-010]": [f"gpu-{n}" for n in range(1, 11)],
    "a[1-2]b[3-4]": ["a1b3", "a1b4", "a2b3", "a2b4"],
    "gpu-a-[1-2],x[7]": ["gpu-a-1", "gpu-a-2", "x7"],
    "gpu-1 gpu-2,,gpu-3": ["gpu-1", "gpu-2", "gpu-3"],
    "gpu-[1,1]": ["gpu-1", "gpu-1"],
}


@pytest.mark.parametrize("expr", sorted(EXPANSIONS))
def test_expand_hostlist(expr):
    assert power.expand_hostlist(expr) == EXPANSIONS[expr]


@pytest.mark.parametrize("expr", ["gpu-[]", "gpu-[1-2", "gpu-1-2]", "gpu-[3-1]", "gpu-[a-b]",
                                  "gpu-[1-3:2]", "gpu-[[1]]", "gpu-[1-999999999]"])
def test_expand_hostlist_rejects(expr):
    with pytest.raises(ValueError):
        power.expand_hostlist(expr)


@pytest.mark.parametrize("expr", ["a[1-400]b[1-400]", "gpu-[1-60000],cpu-[1-60000]", "r[1-10]n[1-10]g[1-1001]"])
def test_expand_hostlist_counts_before_it_expands(expr):
    with pytest.raises(ValueError, match="more than"):
        power.expand_hostlist(expr)
    assert len(power.expand_hostlist("r[1-10]n[1-10]g[1-1000]")) == power.core.MAX_HOSTS


def test_a_resume_of_ten_billion_names_sets_them_down_instead_of_running_out_of_memory(tmp_path):
    """`gpu-[1-99999]x[1-99999]`: each range is under MAX_HOSTS, their product is 10**10 names. Before,
    resume built them all and died of MemoryError, leaving the nodes for slurmctld to wait on. Run
    as slurmctld runs it, in a process held to 1 GiB of address space (the old program reached it in
    seconds), so a regression fails here instead of exhausting the machine."""
    import resource

    stub, record = recorder(tmp_path)
    (tmp_path / "cluster.json").write_text(json.dumps({**config_for(), "log_file": str(tmp_path / "power.log")}))
    (tmp_path / "aicluster-resume").symlink_to(installed(tmp_path))

    def one_gib():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    expr = "gpu-[1-99999]x[1-99999]"
    done = subprocess.run([str(tmp_path / "aicluster-resume"), expr], preexec_fn=one_gib,
                          env={**os.environ, **aws_env("http://127.0.0.1:9"), "AICLUSTER_SCONTROL": str(stub),
                               "AICLUSTER_CONFIG": str(tmp_path / "cluster.json"),
                               "AICLUSTER_STATE_DIR": str(tmp_path / "state")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "MemoryError" not in done.stderr
    ((*head, reason),) = calls(record)
    assert head == ["update", f"nodename={expr}", "state=down"]
    assert reason.startswith('reason="BadHostlist: hostlist') and "more than 100000 names" in reason


def test_expand_hostlist_agrees_with_scontrol(tmp_path):
    """Slurm's own expander (scontrol needs a slurm.conf to start, nothing more)."""
    scontrol = shutil.which("scontrol")
    assert scontrol, "scontrol (slurm-client) is required; CI installs Slurm 22.05"
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\n")
    for expr, expected in EXPANSIONS.items():
        done = subprocess.run([scontrol, "show", "hostnames", expr], capture_output=True, text=True,
                              env={**os.environ, "SLURM_CONF": str(conf)}, check=True)
        assert done.stdout.split() == expected, expr


@pytest.mark.parametrize("names, expected", [
    (["gpu-1", "gpu-2", "gpu-3", "gpu-5", "infer-1"], "gpu-[1-3,5],infer-1"),
    (["gpu-7"], "gpu-7"),
    (["gpu-9", "gpu-10", "gpu-08", "gpu-09"], "gpu-[9-10],gpu-[08-09]"),
])
def test_compress_hostlist(names, expected):
    assert power.compress_hostlist(names) == expected
    assert sorted(power.expand_hostlist(expected)) == sorted(names)


@pytest.mark.parametrize("node, pool", [("gpu-12", "gpu"), ("gpu-a-3", "gpu-a"), ("p5en-1", "p5en"),
                                        ("gpu", None), ("GPU-1", None), ("gpu-", None)])
def test_pool_of(node, pool):
    assert power.pool_of(node) == pool


# --- CreateFleet request ---------------------------------------------------------------------


def config_for(capacity="on-demand", **pool):
    return {
        "cluster": CLUSTER, "region": REGION, "cluster_tag": "aicluster-cluster",
        "node_tag": "aicluster-node", "pool_tag": "aicluster-pool", "log_file": "/dev/null",
        "pools": {"gpu": {"launch_template_id": "lt-0abc", "instance_type": "p5.48xlarge",
                          "subnet_id": "subnet-0abc", "placement_group": "p5-train-gpu-placement-1234",
                          "capacity": capacity, "reservation_id": None, "min_nodes": 0, "max_nodes": 16,
                          **pool}},
    }


@pytest.mark.parametrize("capacity, target_type, options", [
    ("on-demand", "on-demand", "OnDemandOptions"),
    ("reservation", "on-demand", "OnDemandOptions"),
    ("capacity-block", "capacity-block", "OnDemandOptions"),
    ("spot", "spot", "SpotOptions"),
])
def test_fleet_request_is_instant_all_or_nothing(capacity, target_type, options):
    request = power.fleet_request(config_for(capacity), "gpu", 4)
    assert request["Type"] == "instant"
    assert request["LaunchTemplateConfigs"] == [{
        "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0abc", "Version": "$Latest"},
        "Overrides": [{"InstanceType": "p5.48xlarge"}],
    }]
    assert request["TargetCapacitySpecification"] == {"TotalTargetCapacity": 4, "DefaultTargetCapacityType": target_type}
    assert request[options]["MinTargetCapacity"] == 4
    assert request[options]["SingleInstanceType"] and request[options]["SingleAvailabilityZone"]
    if options == "OnDemandOptions":
        assert request[options]["CapacityReservationOptions"] == {"UsageStrategy": "use-capacity-reservations-first"}
    tags = [{"Key": "aicluster-cluster", "Value": CLUSTER}, {"Key": "aicluster-pool", "Value": "gpu"}]
    assert request["TagSpecifications"] == [{"ResourceType": "instance", "Tags": tags},
                                            {"ResourceType": "fleet", "Tags": tags}]
    # The request is valid for the EC2 API model (botocore validates before the stub answers).
    client = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("create_fleet", {"FleetId": "fleet-1", "Instances": []}, request)
        client.create_fleet(**request)


# --- in process, with Stubber: capacity errors -----------------------------------------------


LIVE = {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}


def fleet_params(config: dict, pool: str, count: int) -> dict:
    """The CreateFleet request the program sends: its ClientToken and resume-id tag are a fresh
    UUID per launch."""
    request = power.fleet_request(config, pool, count, "request-id")
    request["ClientToken"] = ANY
    for spec in request["TagSpecifications"]:
        spec["Tags"] = [{**tag, "Value": ANY} if tag["Key"] == power.RESUME_ID_TAG else tag for tag in spec["Tags"]]
    return request


def expect_no_live_instances(stubber) -> None:
    """The duplicate check every resume starts with: the cluster's live instances (none)."""
    stubber.add_response("describe_instances", {"Reservations": []}, {
        "Filters": [{"Name": "tag:aicluster-cluster", "Values": [CLUSTER]}, LIVE], "MaxResults": 1000})


def by_id(*ids: str) -> dict:
    return {"Filters": [{"Name": "instance-id", "Values": list(ids)}], "MaxResults": 1000}


@pytest.fixture
def stubbed(tmp_path, monkeypatch):
    stub, record = recorder(tmp_path)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    # Stubber answers in order: one launch and one tag at a time.
    monkeypatch.setattr(power.core, "LAUNCH_PARALLELISM", 1)
    monkeypatch.setattr(power, "TAG_PARALLELISM", 1)
    client = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber, record
        stubber.assert_no_pending_responses()


ICE = "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested"


def test_insufficient_capacity_marks_exactly_those_nodes_down(stubbed):
    client, stubber, record = stubbed
    config = config_for()
    config["pools"]["infer"] = {**config["pools"]["gpu"], "launch_template_id": "lt-0def", "instance_type": "g6.xlarge"}
    expect_no_live_instances(stubber)
    stubber.add_client_error("create_fleet", service_error_code="InsufficientInstanceCapacity",
                             service_message=ICE, http_status_code=500,
                             expected_params=fleet_params(config, "gpu", 3))
    stubber.add_response("create_fleet", {"FleetId": "fleet-2", "Instances": [
        {"InstanceIds": ["i-0aaa"], "InstanceType": "g6.xlarge", "Lifecycle": "on-demand"}]},
        fleet_params(config, "infer", 1))
    stubber.add_response("create_tags", {}, {"Resources": ["i-0aaa"],
                                             "Tags": [{"Key": "aicluster-node", "Value": "infer-1"}]})
    stubber.add_response("describe_instances", {"Reservations": [{"Instances": [
        {"InstanceId": "i-0aaa", "PrivateIpAddress": "10.0.0.7", "PrivateDnsName": "ip-10-0-0-7.ec2.internal"}]}]},
        by_id("i-0aaa"))

    failed = power.resume(client, config, power.expand_hostlist("gpu-[1-3],infer-1"))

    assert failed == 3
    # The launched node is named first: setting nodes DOWN requeues their jobs, and slurmctld may
    # stall a moment on that; the address of a healthy node must not wait behind it.
    assert calls(record) == [
        ["update", "nodename=infer-1", "nodeaddr=10.0.0.7", "nodehostname=ip-10-0-0-7"],
        ["update", "nodename=gpu-[1-3]", "state=down", f'reason="InsufficientInstanceCapacity: {ICE}"'],
    ]


def test_partial_fleet_is_terminated_and_its_nodes_set_down(stubbed):
    client, stubber, record = stubbed
    config = config_for()
    expect_no_live_instances(stubber)
    stubber.add_response("create_fleet", {
        "FleetId": "fleet-3",
        "Instances": [{"InstanceIds": ["i-0bbb"], "InstanceType": "p5.48xlarge", "Lifecycle": "on-demand"}],
        "Errors": [
            {"ErrorCode": "UnfulfillableCapacity",
             "ErrorMessage": "Failed to fulfill capacity. Please review errors in the response."},
            {"ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "only \"1\" left\nsorry"},
        ]}, fleet_params(config, "gpu", 2))
    stubber.add_response("terminate_instances", {}, {"InstanceIds": ["i-0bbb"]})
    # Anything else the request launched (by its resume-id tag): nothing.
    stubber.add_response("describe_instances", {"Reservations": []}, None)

    assert power.resume(client, config, ["gpu-4", "gpu-5"]) == 2
    assert calls(record) == [["update", "nodename=gpu-[4-5]", "state=down",
                              "reason=\"InsufficientInstanceCapacity: only '1' left sorry\""]]


def test_quota_error_reason_is_truncated(stubbed):
    client, stubber, record = stubbed
    expect_no_live_instances(stubber)
    stubber.add_client_error("create_fleet", service_error_code="VcpuLimitExceeded",
                             service_message="You have requested more vCPU capacity " + "x" * 500,
                             expected_params=None)
    assert power.resume(client, config_for(), ["gpu-1"]) == 1
    (call,) = calls(record)
    assert call[-1].startswith('reason="VcpuLimitExceeded: You have requested more vCPU capacity')
    assert len(call[-1]) <= power.MAX_REASON + len('reason=""')


def test_fleet_short_without_errors_is_not_silent(stubbed):
    """moto does this for capacity-block: no instances and no Errors."""
    client, stubber, record = stubbed
    expect_no_live_instances(stubber)
    stubber.add_response("create_fleet", {"FleetId": "fleet-4", "Instances": []}, None)
    stubber.add_response("describe_instances", {"Reservations": []}, None)
    assert power.resume(client, config_for("capacity-block"), ["gpu-1", "gpu-2"]) == 2
    assert calls(record) == [["update", "nodename=gpu-[1-2]", "state=down",
                              'reason="UnfulfillableCapacity: CreateFleet launched 0 of 2 instances"']]


def test_untaggable_instance_is_terminated_and_its_node_set_down(stubbed):
    client, stubber, record = stubbed
    expect_no_live_instances(stubber)
    stubber.add_response("create_fleet", {"FleetId": "fleet-5", "Instances": [
        {"InstanceIds": ["i-01", "i-02"], "InstanceType": "p5.48xlarge", "Lifecycle": "on-demand"}]}, None)
    stubber.add_response("create_tags", {}, {"Resources": ["i-01"], "Tags": [{"Key": "aicluster-node", "Value": "gpu-1"}]})
    stubber.add_client_error("create_tags", service_error_code="UnauthorizedOperation", service_message="denied")
    stubber.add_response("describe_instances", {"Reservations": [{"Instances": [
        {"InstanceId": "i-01", "PrivateIpAddress": "10.0.0.1", "PrivateDnsName": "ip-10-0-0-1.ec2.internal"}]}]},
        by_id("i-01"))
    stubber.add_response("terminate_instances", {}, {"InstanceIds": ["i-02"]})
    assert power.resume(client, config_for(), ["gpu-1", "gpu-2"]) == 1
    assert calls(record) == [
        ["update", "nodename=gpu-2", "state=down", 'reason="UnauthorizedOperation: denied"'],
        ["update", "nodename=gpu-1", "nodeaddr=10.0.0.1", "nodehostname=ip-10-0-0-1"],
    ]


# --- in process, with Stubber: node-name records (cloud_dns) ---------------------------------


@pytest.fixture
def route53():
    client = boto3.client("route53", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield power.NodeRecords(client, "Z0ABC", DOMAIN), stubber
        stubber.assert_no_pending_responses()


def upsert(*pairs):
    return {"HostedZoneId": "Z0ABC", "ChangeBatch": {"Comment": f"aicluster-power: resume {pairs[0][0]}"
                                                     if len(pairs) == 1 else None, "Changes": [
        {"Action": "UPSERT", "ResourceRecordSet": {"Name": f"{node}.{DOMAIN}.", "Type": "A", "TTL": 60,
                                                   "ResourceRecords": [{"Value": ip}]}} for node, ip in pairs]}}


def test_refused_record_sets_the_node_down_and_terminates_its_instance(stubbed, route53):
    client, stubber, record = stubbed
    dns, dns_stub = route53
    expect_no_live_instances(stubber)
    stubber.add_response("create_fleet", {"FleetId": "fleet-6", "Instances": [
        {"InstanceIds": ["i-01"], "InstanceType": "p5.48xlarge", "Lifecycle": "on-demand"}]}, None)
    stubber.add_response("create_tags", {}, {"Resources": ["i-01"], "Tags": [{"Key": "aicluster-node", "Value": "gpu-1"}]})
    stubber.add_response("describe_instances", {"Reservations": [{"Instances": [
        {"InstanceId": "i-01", "PrivateIpAddress": "10.0.0.1", "PrivateDnsName": "ip-10-0-0-1.ec2.internal"}]}]},
        by_id("i-01"))
    dns_stub.add_client_error("change_resource_record_sets", service_error_code="AccessDenied",
                              service_message="not authorized to perform: route53:ChangeResourceRecordSets",
                              http_status_code=403, expected_params=upsert(("gpu-1", "10.0.0.1")))
    stubber.add_response("terminate_instances", {}, {"InstanceIds": ["i-01"]})

    assert power.resume(client, config_for(), ["gpu-1"], dns) == 1
    assert calls(record) == [["update", "nodename=gpu-1", "state=down",
                              'reason="AccessDenied: not authorized to perform: route53:ChangeResourceRecordSets"']]


def test_record_is_written_before_slurm_gets_the_address(stubbed, route53):
    """One UPSERT for the batch, before any `scontrol update nodeaddr=`."""
    client, stubber, record = stubbed
    dns, dns_stub = route53
    expect_no_live_instances(stubber)
    stubber.add_response("create_fleet", {"FleetId": "fleet-7", "Instances": [
        {"InstanceIds": ["i-01", "i-02"], "InstanceType": "p5.48xlarge", "Lifecycle": "on-demand"}]}, None)
    for iid, node in (("i-01", "gpu-1"), ("i-02", "gpu-2")):
        stubber.add_response("create_tags", {}, {"Resources": [iid], "Tags": [{"Key": "aicluster-node", "Value": node}]})
    stubber.add_response("describe_instances", {"Reservations": [{"Instances": [
        {"InstanceId": f"i-0{n}", "PrivateIpAddress": f"10.0.0.{n}"} for n in (1, 2)]}]}, by_id("i-01", "i-02"))

    expected = upsert(("gpu-1", "10.0.0.1"), ("gpu-2", "10.0.0.2"))
    expected["ChangeBatch"]["Comment"] = "aicluster-power: resume gpu-[1-2]"
    dns_stub.add_response("change_resource_record_sets", {"ChangeInfo": {
        "Id": "C1", "Status": "PENDING", "SubmittedAt": "2026-01-01T00:00:00Z"}}, expected)
    scontrol_seen, change = [], dns._change

    def change_and_note_scontrol(*args):
        scontrol_seen.append(calls(record))
        return change(*args)

    dns._change = change_and_note_scontrol
    assert power.resume(client, config_for(), ["gpu-1", "gpu-2"], dns) == 0
    assert scontrol_seen == [[]]                                    # no address handed to Slurm yet
    # One scontrol call for the batch, the lists in the same order.
    assert calls(record) == [["update", "nodename=gpu-1,gpu-2", "nodeaddr=10.0.0.1,10.0.0.2",
                              "nodehostname=10.0.0.1,10.0.0.2"]]


def test_unreadable_config_sets_the_nodes_down(tmp_path, monkeypatch):
    stub, record = recorder(tmp_path)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
    monkeypatch.setenv("AICLUSTER_CONFIG", str(tmp_path / "missing.json"))
    monkeypatch.setenv("AICLUSTER_LOG", str(tmp_path / "log" / "power.log"))
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    assert power.main(["/opt/aicluster/bin/aicluster-resume", "gpu-[1-2]"]) == 1
    ((*head, reason),) = calls(record)
    assert head == ["update", "nodename=gpu-[1-2]", "state=down"]
    assert reason.startswith('reason="ConfigError: cannot read') and "missing.json" in reason
    assert "ConfigError" in (tmp_path / "log" / "power.log").read_text()
    assert power.main(["/opt/aicluster/bin/aicluster-suspend", "gpu-1"]) == 1
    # The instance may still run: the suspend waits in pending-suspend.json for the reconcile loop.
    pending = json.loads((tmp_path / "state" / "pending-suspend.json").read_text())
    assert pending["gpu-1"]["action"] == "suspend" and pending["gpu-1"]["error"].startswith("ConfigError")
    assert power.main(["aicluster-power.py", "stop", "gpu-1"]) == 2


# --- as slurmctld runs it: a subprocess against moto's EC2 server ----------------------------


@pytest.fixture
def aws(moto_endpoint, tmp_path):
    """A fresh moto EC2 with our network, placement group and launch template; the environment
    and links a subprocess needs to run the programs against it."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_endpoint,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    route53 = boto3.client("route53", region_name=REGION, endpoint_url=moto_endpoint,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    # The cluster's private zone of node names, as SlurmController creates it.
    zone = route53.create_hosted_zone(Name=DOMAIN, CallerReference="p5-train", VPC={"VPCRegion": REGION, "VPCId": vpc},
                                      HostedZoneConfig={"Comment": "node names", "PrivateZone": True})
    zone_id = zone["HostedZone"]["Id"].rsplit("/", 1)[-1]
    sg = ec2.create_security_group(GroupName="p5-train-efa", Description="efa", VpcId=vpc)["GroupId"]
    # moto 5.2 has no CreatePlacementGroup (NotImplementedError); the template names the group,
    # which moto neither checks nor applies.
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    labels = [{"Key": "aicluster-cluster", "Value": CLUSTER}, {"Key": "aicluster-role", "Value": "compute"},
              {"Key": "aicluster-pool", "Value": "gpu"}]
    template = ec2.create_launch_template(LaunchTemplateName="p5-train-gpu", LaunchTemplateData={
        "ImageId": image,
        "InstanceType": "p5.48xlarge",
        "NetworkInterfaces": [
            {"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "interface", "SubnetId": subnet,
             "Groups": [sg], "AssociatePublicIpAddress": False, "DeleteOnTermination": True},
            {"NetworkCardIndex": 0, "DeviceIndex": 1, "InterfaceType": "efa-only", "SubnetId": subnet,
             "Groups": [sg], "DeleteOnTermination": True},
        ],
        "Placement": {"AvailabilityZone": "us-east-1a", "GroupName": "p5-train-gpu-placement-1234"},
        "MetadataOptions": {"HttpTokens": "required", "InstanceMetadataTags": "enabled"},
        "TagSpecifications": [{"ResourceType": kind, "Tags": labels}
                              for kind in ("instance", "volume", "network-interface")],
    })["LaunchTemplate"]["LaunchTemplateId"]

    config = config_for(launch_template_id=template, subnet_id=subnet)
    config |= {"log_file": str(tmp_path / "log" / "power.log"), "hosted_zone_id": zone_id, "dns_domain": DOMAIN}
    (tmp_path / "cluster.json").write_text(json.dumps(config))
    stub, record = recorder(tmp_path)
    program = installed(tmp_path)
    for action in ("resume", "suspend", "resume-fail"):
        (tmp_path / f"aicluster-{action}").symlink_to(program)
    env = {
        "PATH": f"{stub.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        **aws_env(moto_endpoint),
        "AICLUSTER_CONFIG": str(tmp_path / "cluster.json"),
        "AICLUSTER_SCONTROL": str(stub),
        "AICLUSTER_STATE_DIR": str(tmp_path / "state"),
    }

    aws = SimpleNamespace(ec2=ec2, route53=route53, zone_id=zone_id, template=template, image=image, record=record,
                          config=config, env=env, log=Path(config["log_file"]))

    def run(link: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(tmp_path / link), *args], env=env,
                              capture_output=True, text=True, timeout=120)

    def instances(**tags) -> dict[str, dict]:
        filters = [{"Name": f"tag:{k.replace('_', '-')}", "Values": [v]} for k, v in tags.items()]
        found = {}
        for reservation in ec2.describe_instances(Filters=filters)["Reservations"]:
            for instance in reservation["Instances"]:
                found[instance["InstanceId"]] = {**instance, "TagMap": {t["Key"]: t["Value"] for t in instance.get("Tags", [])}}
        return found

    def records() -> dict[str, tuple[int, list[str]]]:
        """The zone's A records: name -> (TTL, addresses)."""
        sets = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        return {r["Name"]: (r["TTL"], [v["Value"] for v in r["ResourceRecords"]]) for r in sets if r["Type"] == "A"}

    aws.run, aws.instances, aws.records = run, instances, records
    return aws


def test_resume_launches_tagged_instances_from_the_template(aws):
    done = aws.run("aicluster-resume", "gpu-[1-3]")
    assert done.returncode == 0, done.stderr

    launched = aws.instances(aicluster_cluster=CLUSTER)
    assert len(launched) == 3
    by_node = {i["TagMap"]["aicluster-node"]: i for i in launched.values()}
    assert sorted(by_node) == ["gpu-1", "gpu-2", "gpu-3"]
    for instance in launched.values():
        assert instance["TagMap"]["aicluster-pool"] == "gpu"
        assert instance["TagMap"]["aicluster-role"] == "compute"   # from the template's tag specs
        assert instance["InstanceType"] == "p5.48xlarge"
        assert instance["ImageId"] == aws.image
        assert instance["State"]["Name"] in ("pending", "running")

    (fleet,) = aws.ec2.describe_fleets()["Fleets"]
    assert fleet["Type"] == "instant"
    assert fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateId"] == aws.template
    assert fleet["TargetCapacitySpecification"]["TotalTargetCapacity"] == 3
    assert {"Key": "aicluster-cluster", "Value": CLUSTER} in fleet["Tags"]

    ((_, names, addrs, hosts),) = calls(aws.record)             # one batched scontrol update
    handed = dict(zip(names.removeprefix("nodename=").split(","),
                      zip(addrs.removeprefix("nodeaddr=").split(","), hosts.removeprefix("nodehostname=").split(","))))
    assert handed == {node: (i["PrivateIpAddress"], i["PrivateDnsName"].split(".")[0]) for node, i in by_node.items()}
    log = aws.log.read_text()
    assert all(node in log for node in by_node), log
    # Every node name resolves (cloud_dns): <node>.<cluster domain> -> the address slurmctld has.
    assert aws.records() == {f"{node}.{DOMAIN}.": (60, [i["PrivateIpAddress"]]) for node, i in by_node.items()}


def test_suspend_terminates_exactly_the_named_nodes(aws):
    assert aws.run("aicluster-resume", "gpu-[1-3]").returncode == 0
    # Another cluster's node with the same name must survive.
    other = aws.ec2.run_instances(ImageId=aws.image, MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": "aicluster-cluster", "Value": "other"},
                                              {"Key": "aicluster-node", "Value": "gpu-1"}]}])["Instances"][0]["InstanceId"]

    done = aws.run("aicluster-suspend", "gpu-[1-2]")
    assert done.returncode == 0, done.stderr

    states = {i["TagMap"].get("aicluster-node") + "@" + i["TagMap"]["aicluster-cluster"]: i["State"]["Name"]
              for i in aws.instances().values()}
    assert states["gpu-1@p5-train"] == states["gpu-2@p5-train"] == "terminated"
    assert states["gpu-3@p5-train"] == states["gpu-1@other"] == "running"
    assert aws.instances()[other]["State"]["Name"] == "running"
    assert "suspend: terminating gpu-1" in aws.log.read_text()
    assert list(aws.records()) == [f"gpu-3.{DOMAIN}."]                       # the suspended names are gone

    done = aws.run("aicluster-resume-fail", "gpu-3")
    assert done.returncode == 0, done.stderr
    assert [i["State"]["Name"] for i in aws.instances(aicluster_node="gpu-3").values()] == ["terminated"]
    assert aws.records() == {}
    # Nodes whose records are gone already (or never were written): nothing to do, no error.
    done = aws.run("aicluster-suspend", "gpu-[1-4]")
    assert done.returncode == 0, done.stderr


def test_resume_of_a_node_launched_again_replaces_its_record(aws):
    assert aws.run("aicluster-resume", "gpu-1").returncode == 0
    first = aws.records()[f"gpu-1.{DOMAIN}."]
    assert aws.run("aicluster-suspend", "gpu-1").returncode == 0
    assert aws.run("aicluster-resume", "gpu-1").returncode == 0
    (live,) = [i for i in aws.instances(aicluster_node="gpu-1").values() if i["State"]["Name"] != "terminated"]
    assert aws.records() == {f"gpu-1.{DOMAIN}.": (60, [live["PrivateIpAddress"]])}
    assert first[1] != [live["PrivateIpAddress"]]


def test_resume_of_an_unknown_pool_marks_it_down(aws):
    done = aws.run("aicluster-resume", "infer-[1-2],gpu-1")
    assert done.returncode != 0
    assert "UnknownPool" in done.stderr
    recorded = calls(aws.record)
    assert recorded[0] == ["update", "nodename=infer-[1-2]", "state=down",
                           "reason=\"UnknownPool: no pool 'infer' in cluster p5-train (pools: gpu)\""]
    assert recorded[1][:2] == ["update", "nodename=gpu-1"] and recorded[1][2].startswith("nodeaddr=")
    assert [i["TagMap"]["aicluster-node"] for i in aws.instances(aicluster_cluster=CLUSTER).values()] == ["gpu-1"]


def test_cli_forms(aws, tmp_path):
    done = aws.run("aicluster-resume")                        # no hostlist
    assert done.returncode == 2 and "usage" in done.stderr
    direct_log = tmp_path / "direct.log"
    done = subprocess.run([*node_programs.module_command("aws_power"), "resume", "gpu-2"],
                          env={**aws.env, "AICLUSTER_LOG": str(direct_log)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resume: gpu-2 is i-" in direct_log.read_text()
    assert not aws.log.exists()                               # AICLUSTER_LOG overrides log_file


# --- the cluster's instances as the reconcile loop sees them ---------------------------------


def test_list_cluster_reports_nodes_requests_events_and_bootstrap_errors(stubbed):
    """Every live instance with the cluster tag, named or not, with its scheduled events (Describe-
    InstanceStatus), spot interruption notices (DescribeSpotInstanceRequests) and the reason a node
    gave for a failed set-up (its aicluster-bootstrap-error tag)."""
    import datetime

    client, stubber, _ = stubbed
    launched = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def instance(iid, tags, **extra):
        return {"InstanceId": iid, "State": {"Name": "running"}, "LaunchTime": launched,
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()], **extra}

    base = {"aicluster-cluster": CLUSTER, "aicluster-pool": "gpu", power.RESUME_ID_TAG: "r-1"}
    stubber.add_response("describe_instances", {"Reservations": [{"Instances": [
        instance("i-01", {**base, "aicluster-node": "gpu-1"}),
        instance("i-02", base),                                           # never named: tagging failed
        instance("i-03", {**base, "aicluster-node": "gpu-3", "aicluster-bootstrap-error": "mount /fsx failed"},
                 InstanceLifecycle="spot", SpotInstanceRequestId="sir-3"),
    ]}]}, {"Filters": [{"Name": "tag:aicluster-cluster", "Values": [CLUSTER]}, LIVE], "MaxResults": 1000})
    stubber.add_response("describe_instance_status", {"InstanceStatuses": [
        {"InstanceId": "i-01", "Events": [{"Code": "system-maintenance", "Description": "degraded host",
                                           "NotBefore": launched}]},
        {"InstanceId": "i-02", "Events": [{"Code": "system-reboot", "Description": "[Completed] done"}]}]},
        {"InstanceIds": ["i-01", "i-02", "i-03"], "IncludeAllInstances": True})
    stubber.add_response("describe_spot_instance_requests", {"SpotInstanceRequests": [
        {"SpotInstanceRequestId": "sir-3", "InstanceId": "i-03", "Status": {"Code": "marked-for-termination"}}]},
        {"Filters": [{"Name": "spot-instance-request-id", "Values": ["sir-3"]},
                     {"Name": "status-code", "Values": ["marked-for-termination"]}]})

    listed = {i.id: i for i in power.Ec2(client, config_for()).list_cluster()}

    assert [listed[i].node for i in ("i-01", "i-02", "i-03")] == ["gpu-1", None, "gpu-3"]
    assert all(i.resume_id == "r-1" and i.pool == "gpu" and i.state == "running" for i in listed.values())
    assert listed["i-01"].launched_at == launched.timestamp()
    assert listed["i-01"].events == ("system-maintenance: degraded host (not before 2026-01-01 00:00:00+00:00)",)
    assert listed["i-02"].events == ()                                     # a completed event is no notice
    assert listed["i-03"].events == ("spot-interruption: marked-for-termination",)
    assert listed["i-03"].bootstrap_error == "mount /fsx failed"


def test_fleet_request_carries_its_client_token_and_request_tag():
    request = power.fleet_request(config_for(), "gpu", 2, "0b7e6d7e-3c1a-4c3e-9d55-5b0b7a9f3c11")
    assert request["ClientToken"] == "0b7e6d7e-3c1a-4c3e-9d55-5b0b7a9f3c11"
    for spec in request["TagSpecifications"]:
        assert {"Key": "aicluster-resume-id", "Value": request["ClientToken"]} in spec["Tags"]
    with pytest.raises(ValueError):
        power.fleet_request(config_for(), "gpu", 2, "x" * 65)              # EC2 takes at most 64


def test_resume_file_groups_nodes_per_job(tmp_path):
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": "gpu-[1-5],infer-1", "jobs": [
        {"job_id": 7, "nodes_alloc": "gpu-[1-3]", "nodes_resume": "gpu-[2-3]"},
        {"job_id": 8, "nodes_alloc": "gpu-[3-4]", "nodes_resume": "gpu-[3-4]"}]}))
    jobs = power.core.resume_file_jobs(str(resume_file))
    assert jobs == [("7", ["gpu-2", "gpu-3"]), ("8", ["gpu-3", "gpu-4"])]
    groups = power.core.resume_groups(power.expand_hostlist("gpu-[1-5],infer-1"), jobs)
    assert [(g.what, g.nodes) for g in groups] == [
        ("job 7", ("gpu-2", "gpu-3")), ("job 8", ("gpu-4",)),      # gpu-3 goes with the first job
        ("pool gpu", ("gpu-1", "gpu-5")), ("pool infer", ("infer-1",))]
    (tmp_path / "bad.json").write_text("{")
    assert power.core.resume_file_jobs(str(tmp_path / "bad.json")) is None


def test_resume_file_of_slurm_22_05_groups_nodes_per_job_too(tmp_path):
    """Slurm 22.05 writes `all_nodes` and each job's `nodes` (captured from a real 22.05.8
    slurmctld in tests/gcp/test_reconcile_gcp.py); 23.02 and later write `all_nodes_resume` and
    `nodes_resume`. Before, a 22.05 file gave every job no nodes: one job's stockout failed all."""
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes": "gpu-[1-4]", "jobs": [
        {"job_id": 3, "nodes": "gpu-[1-2]"}, {"job_id": 4, "nodes": "gpu-[3-4]"}]}))
    assert power.core.resume_file_jobs(str(resume_file)) == [("3", ["gpu-1", "gpu-2"]), ("4", ["gpu-3", "gpu-4"])]


def test_scontrol_is_retried_while_slurmctld_is_busy(tmp_path, monkeypatch):
    """A busy slurmctld (a blocking name lookup, a burst of RPCs) answers "Socket timed out": the
    update goes through on a later try instead of setting a healthy node DOWN. Any other refusal
    is final, and tried once."""
    tries = tmp_path / "tries"
    fake = tmp_path / "scontrol"
    fake.write_text(f"""#!/bin/sh
echo x >> {tries}
[ "$1" = bad ] && {{ echo "scontrol: error: Invalid node name specified" >&2; exit 1; }}
[ "$(wc -l < {tries})" -ge 3 ] && exit 0
echo "slurm_update error: Socket timed out on send/recv operation" >&2
exit 1
""")
    fake.chmod(0o755)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(fake))
    monkeypatch.setattr(power.core.time, "sleep", lambda s: None)
    assert power.core.scontrol("update", "nodename=gpu-1", "nodeaddr=10.0.0.1")
    assert len(tries.read_text().splitlines()) == 3
    tries.unlink()
    assert not power.core.scontrol("bad")
    assert len(tries.read_text().splitlines()) == 1
