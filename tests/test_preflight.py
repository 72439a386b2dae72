"""`aicluster preflight` (docs/preflight.md): the offline checks against the catalog, the AWS live
checks against moto's server on loopback and, where moto emulates nothing (Service Quotas for EC2
and FSx, capacity reservations and Capacity Blocks), against botocore's Stubber; the GCP live
checks against tests/support/fake_gcp.py. A call that is throttled or gets no answer is
`skipped` with its reason: never a pass, never a traceback."""
from __future__ import annotations

import contextlib
import copy
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from aicluster.catalog import load_catalog
from aicluster.commands import preflight_aws
from aicluster.commands.preflight import PreflightReport, run_preflight
from aicluster.commands.stacks import StackConfig
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, CR, GCP_MIN, STACK_NAMES, stack_spec
from tests.support.bad_specs import pool, spec
from tests.support.fake_gcp import TOKEN, FakeGcp


def cli(*args: str) -> tuple[int, str, str]:
    from aicluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def stack_of(data: dict, **config) -> StackConfig:
    return StackConfig("test", Path("Pulumi.test.yaml"), {"aicluster:cluster": data, **config})


def spec_file(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def by_name(report: PreflightReport, name: str):
    found = [c for c in report.checks if c.name == name]
    assert found, [c.name for c in report.checks]
    return found[0]


@pytest.fixture
def no_cloud_credentials(monkeypatch, tmp_path):
    """No credentials anywhere boto3's chain or the GCP lookup would find them."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN", "AICLUSTER_GCP_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


# --- offline -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_passes_the_offline_preflight(stack):
    code, out, err = cli("preflight", "--stack", stack, "--offline")
    assert code == 0, out + err
    assert "0 failed" in out and "FAILED" not in out


def test_a_type_the_region_does_not_offer_fails_with_where_it_is_offered(tmp_path):
    """trn2.48xlarge is offered in us-east-2, not us-east-1 (DescribeInstanceTypeOfferings)."""
    code, out, _ = cli("preflight", spec_file(tmp_path, pool(instance_type="trn2.48xlarge")), "--offline")
    assert code == 1
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "offering pools[0]" in line)
    assert "FAILED" in lines[at] and "not offered in us-east-1" in lines[at]
    assert "-> move the cluster to a region that offers it: ap-south-2, us-east-2" in lines[at + 1]


def test_gcp_machine_type_outside_its_zones_fails_naming_the_zones_of_the_region():
    report = run_preflight(stack_of(pool(GCP_MIN, instance_type="a3-ultragpu-8g")), live=False)
    check = by_name(report, "offering pools[0]")
    assert check.status == "failed" and report.failed and report.exit_code == 1
    assert "us-central1-b" in check.remedy and check.path == "pools[0].instance_type"


def test_tpu_generation_outside_its_zones_fails():
    data = pool(GCP_MIN, tpu={"type": "v4", "topology": "2x2x1"}, max_nodes=1)
    data["pools"][0].pop("instance_type")
    data.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    report = run_preflight(stack_of(data), live=False)
    check = by_name(report, "offering pools[0]")
    assert check.status == "failed" and "us-central2-b" in check.remedy


def test_a_region_the_offering_data_does_not_cover_is_skipped_not_passed():
    report = run_preflight(stack_of(spec(region="mx-central-1", zone="mx-central-1a")), live=False)
    check = by_name(report, "offering pools[0]")
    assert check.status == "skipped" and not report.failed


def test_reservation_smaller_than_the_always_on_nodes_fails():
    data = pool(capacity={"type": "reservation", "reservation_id": CR, "nodes": 2}, min_nodes=3, max_nodes=4)
    try:
        parse_spec(data)
    except Exception:   # the spec may refuse it first; then preflight never sees it
        pytest.skip("the spec refuses min_nodes above the reservation already")
    report = run_preflight(stack_of(data), live=False)
    assert by_name(report, "capacity pools[0]").status == "failed"


def test_json_format(tmp_path):
    code, out, _ = cli("preflight", spec_file(tmp_path, AWS_MIN), "--offline", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["failed"] is False and doc["live"] is False
    assert {c["name"] for c in doc["checks"]} >= {"region", "zone", "offering pools[0]", "capacity pools[0]"}
    assert all(c["status"] in ("ok", "failed", "skipped") for c in doc["checks"])


@pytest.mark.parametrize("args, fragment", [
    (("--stack", "aws-p5-slurm", "stacks/Pulumi.aws-p5-slurm.yaml"), "either --stack NAME or FILE"),
    (("--stack", "aws-p5-slurn"), "did you mean aws-p5-slurm"),
])
def test_bad_arguments_exit_2(args, fragment):
    code, out, err = cli("preflight", *args)
    assert code == 2 and fragment in err and "Traceback" not in err, err


def test_no_file_or_stack_means_the_projects_one_stack(tmp_path, monkeypatch):
    """As for `aicluster plan`: inside a project of one's own, its one stack."""
    project = tmp_path / "proj"
    assert cli("new", str(project), "--stack", "aws-p4d-small")[0] == 0
    monkeypatch.chdir(project)
    code, out, err = cli("preflight", "--offline")
    assert code == 0, err
    assert out.startswith("preflight aws-p4d-small:")


def test_provider_region_other_than_the_spec_region_exits_2(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump({"config": {"aws:region": "us-west-2", "aicluster:cluster": AWS_MIN}}))
    code, _, err = cli("preflight", str(path), "--offline")
    assert code == 2 and "aws:region (us-west-2)" in err


def test_a_spec_the_sizing_round_refuses_exits_2_as_for_plan(tmp_path):
    data = spec(storage=[{"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 3000}])
    code, out, err = cli("preflight", spec_file(tmp_path, data), "--offline")
    assert code == 2 and out == "" and "storage[0].capacity_gib: 3000" in err and "did you mean 2400" in err


def test_no_credentials_runs_offline_by_default_and_fails_with_live(no_cloud_credentials):
    report = run_preflight(stack_of(AWS_MIN))
    assert not report.live and not report.failed and "no AWS credentials" in report.live_reason
    assert not any(c.live for c in report.checks)
    report = run_preflight(stack_of(AWS_MIN), live=True)
    assert by_name(report, "credentials").status == "failed" and report.exit_code == 1
    report = run_preflight(stack_of(GCP_MIN), live=True)
    assert by_name(report, "credentials").status == "failed"


# --- AWS live, against moto's server ------------------------------------------------------------


@pytest.fixture
def moto_aws(moto_endpoint, monkeypatch):
    """boto3 pointed at moto's server; moto holds no AWS public SSM parameters, so the catalog's
    image parameters are renamed to ones the test puts there."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ssm = boto3.client("ssm", region_name="us-east-1")
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    images = load_catalog().images
    for role in ("gpu", "trainium", "head"):
        name = f"/aicluster-test/{role}/ami-id"
        ssm.put_parameter(Name=name, Value=ami, Type="String", Overwrite=True)
        monkeypatch.setitem(images[role], "ssm_parameter", name)
    return ami


def test_aws_live_checks_pass_on_moto(moto_aws):
    report = run_preflight(stack_of(AWS_MIN, **{"aws:region": "us-east-1"}))
    assert report.live
    assert by_name(report, "zone (live)").status == "ok"
    assert by_name(report, "offering pools[0] (live)").status == "ok"
    assert by_name(report, "offering head (live)").status == "ok"
    assert by_name(report, "offering head").status == "ok"
    assert by_name(report, "image pools[0]").status == "ok" and moto_aws in by_name(report, "image head").detail
    # moto has no EC2 quotas in Service Quotas: the quota is "could not check", not a pass.
    quota = by_name(report, "quota L-417A185B")
    assert quota.status == "skipped" and "could not check" in quota.detail
    assert not report.failed


def test_aws_live_offering_fails_in_a_zone_without_the_type(moto_aws):
    """moto's recorded offerings: trn1n.32xlarge in us-east-1c only (the region offers it, the zone not)."""
    report = run_preflight(stack_of(pool(instance_type="trn1n.32xlarge")))
    assert by_name(report, "offering pools[0]").status == "ok"          # offline: the region offers it
    live = by_name(report, "offering pools[0] (live)")
    assert live.status == "failed" and "us-east-1c" in live.remedy and report.exit_code == 1


def test_aws_live_zone_the_account_lacks_fails(moto_aws):
    """us-west-1c is a letter some accounts have (catalog), not moto's account (a and b)."""
    report = run_preflight(stack_of(spec(region="us-west-1", zone="us-west-1c",
                                         pools=[{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 1}])))
    assert by_name(report, "zone (live)").status == "failed"


def test_aws_live_image_that_does_not_resolve_fails(moto_aws):
    report = run_preflight(stack_of(pool(image="/aicluster-test/missing/ami-id")))
    assert by_name(report, "image pools[0]").status == "failed"
    report = run_preflight(stack_of(pool(image="ami-0123456789abcdef0")))
    assert by_name(report, "image pools[0]").status == "failed"


# --- AWS live where moto emulates nothing: botocore's Stubber ------------------------------------


def stubbed(service: str) -> tuple[object, Stubber]:
    client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.activate()
    return client, stubber


def quota_answer(code: str, value: float) -> dict:
    return {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": "q", "Value": value}}


@pytest.mark.parametrize("value, status", [(100.0, "failed"), (768.0, "ok"), (5000.0, "ok")])
def test_vcpu_quota_against_the_pools_max_vcpus(value, status):
    """4 x p5.48xlarge (192 vCPUs) on demand need 768 vCPUs of L-417A185B (Stubber: moto has no EC2 quotas)."""
    quotas, stub = stubbed("service-quotas")
    stub.add_response("get_service_quota", quota_answer("L-417A185B", value),
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    stub.add_response("get_service_quota", quota_answer("L-1216C47A", 16.0),
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    check, standard = preflight_aws.vcpu_quota_checks(quotas, parse_spec(AWS_MIN))
    assert check.status == status and "need 768" in check.detail
    # the head (m7i.2xlarge) and one login node (m7i.2xlarge): 16 Standard vCPUs
    assert standard.status == "ok" and "slurm.head_node + slurm.login at max_nodes need 16" in standard.detail
    if status == "failed":
        assert "L-417A185B" in check.remedy and "--desired-value 768" in check.remedy
        assert "servicequotas/home/services/ec2/quotas/L-417A185B" in check.remedy
    stub.assert_no_pending_responses()


def test_spot_and_on_demand_pools_are_counted_against_their_own_quotas():
    data = spec(pools=[{"name": "a", "instance_type": "p5.48xlarge", "max_nodes": 2},
                       {"name": "b", "instance_type": "p4d.24xlarge", "max_nodes": 2},
                       {"name": "c", "instance_type": "p5.48xlarge", "max_nodes": 3, "capacity": "spot"},
                       {"name": "d", "instance_type": "trn1n.32xlarge", "max_nodes": 1}])
    quotas, stub = stubbed("service-quotas")
    for code, value in (("L-417A185B", 10_000), ("L-7212CCBC", 10_000), ("L-2C3B7624", 10_000), ("L-1216C47A", 8)):
        stub.add_response("get_service_quota", quota_answer(code, value), {"ServiceCode": "ec2", "QuotaCode": code})
    checks = {c.name: c for c in preflight_aws.vcpu_quota_checks(quotas, parse_spec(data))}
    assert "need 576" in checks["quota L-417A185B"].detail           # 2 x 192 + 2 x 96
    assert "need 576" in checks["quota L-7212CCBC"].detail           # 3 x 192 spot
    assert "need 128" in checks["quota L-2C3B7624"].detail
    assert checks["quota L-1216C47A"].status == "failed" and "need 16" in checks["quota L-1216C47A"].detail


@pytest.mark.parametrize("error", ["ThrottlingException", "TooManyRequestsException", "AccessDeniedException"])
def test_a_throttled_or_refused_quota_call_is_skipped_not_passed(error):
    quotas, stub = stubbed("service-quotas")
    stub.add_client_error("get_service_quota", error, "slow down")
    stub.add_client_error("get_service_quota", error, "slow down")
    checks = preflight_aws.vcpu_quota_checks(quotas, parse_spec(AWS_MIN))
    assert len(checks) == 2
    assert all(c.status == "skipped" and c.detail.startswith("could not check") for c in checks)


class LostAnswers:
    """A fake client (not botocore): every call fails the way a connection lost mid-answer does."""

    def __getattr__(self, name):
        def call(**kwargs):
            from botocore.exceptions import ConnectionClosedError

            raise ConnectionClosedError(endpoint_url="https://ec2.us-east-1.amazonaws.com")
        return call


def test_lost_answers_make_every_live_check_skipped_never_a_pass():
    checks = preflight_aws.live_checks(parse_spec(pool(capacity={"type": "capacity-block", "reservation_id": CR})),
                                       {}, clients=lambda service: LostAnswers())
    assert checks and all(c.status == "skipped" for c in checks), [(c.name, c.status) for c in checks]
    assert any("no answer from AWS" in c.detail for c in checks)


def test_fsx_lustre_storage_quota():
    data = spec(storage=[{"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 24000}])
    quotas, stub = stubbed("service-quotas")
    answer = {"Quotas": [{"QuotaName": "Lustre Persistent_2 SSD storage capacity", "QuotaCode": "L-FSX00001",
                          "Value": 12000.0, "ServiceCode": "fsx"},
                         {"QuotaName": "File systems per account", "QuotaCode": "L-FSX00002", "Value": 100.0,
                          "ServiceCode": "fsx"}]}
    stub.add_response("list_service_quotas", answer, {"ServiceCode": "fsx"})
    (check,) = preflight_aws.fsx_quota_check(quotas, parse_spec(data))
    assert check.status == "failed" and "L-FSX00001" in check.remedy and "24000" in check.detail
    stub.add_response("list_service_quotas", {"Quotas": [{**answer["Quotas"][0], "Value": 50000.0}]},
                      {"ServiceCode": "fsx"})
    (check,) = preflight_aws.fsx_quota_check(quotas, parse_spec(data))
    assert check.status == "ok"


NOW = datetime.now(timezone.utc)


def reservation(**over) -> dict:
    doc = {"CapacityReservationId": CR, "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
           "State": "active", "TotalInstanceCount": 4, "AvailableInstanceCount": 4, "ReservationType": "default",
           "StartDate": NOW - timedelta(days=1), "EndDate": NOW + timedelta(days=30)}
    return {"CapacityReservations": [{**doc, **over}]}


@pytest.mark.parametrize("kind, answer, status, fragment", [
    ("reservation", reservation(), "ok", "4/4 free"),
    ("reservation", reservation(InstanceType="p4d.24xlarge"), "failed", "it holds p4d.24xlarge"),
    ("reservation", reservation(AvailabilityZone="us-east-1b"), "failed", "it is in us-east-1b"),
    ("reservation", reservation(State="expired"), "failed", "state is expired"),
    ("reservation", reservation(ReservationType="capacity-block"), "failed", "it is a Capacity Block"),
    ("capacity-block", reservation(ReservationType="capacity-block", State="scheduled",
                                   StartDate=NOW + timedelta(days=2), EndDate=NOW + timedelta(days=9)), "ok", " to "),
    ("capacity-block", reservation(ReservationType="capacity-block", State="expired",
                                   EndDate=NOW - timedelta(days=1)), "failed", "it ended"),
    ("capacity-block", reservation(ReservationType="capacity-block", TotalInstanceCount=2, AvailableInstanceCount=2),
     "ok", "nodes above its 2 instances will not launch"),
])
def test_capacity_reservation_and_block(kind, answer, status, fragment):
    """Stubber: moto emulates neither capacity reservations nor Capacity Blocks."""
    ec2, stub = stubbed("ec2")
    stub.add_response("describe_capacity_reservations", answer, {"CapacityReservationIds": [CR]})
    data = pool(capacity={"type": kind, "reservation_id": CR})
    s = parse_spec(data)
    (check,) = preflight_aws.capacity_reservation_check(ec2, s, 0, s.pools[0])
    assert check.status == status and fragment in check.detail, check.detail


def test_a_reservation_that_does_not_exist_fails():
    ec2, stub = stubbed("ec2")
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "nope")
    s = parse_spec(pool(capacity={"type": "reservation", "reservation_id": CR}))
    (check,) = preflight_aws.capacity_reservation_check(ec2, s, 0, s.pools[0])
    assert check.status == "failed" and CR in check.detail


# --- GCP live, against the fake GCE -------------------------------------------------------------


A3U = "a3-ultragpu-8g"


@pytest.fixture
def fake_gce(monkeypatch):
    fake = FakeGcp(project="aicluster-test", zone="europe-west1-b").start()
    monkeypatch.setenv("AICLUSTER_GCP_COMPUTE", f"{fake.base}/compute/v1")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", TOKEN)
    p = "projects/aicluster-test"
    catalog = load_catalog()
    fake.resources.update({
        f"{p}/zones/europe-west1-b": {"name": "europe-west1-b", "status": "UP"},
        f"{p}/zones/europe-west1-b/machineTypes/{A3U}": {"name": A3U, "guestCpus": 224},
        f"{p}/zones/europe-west1-b/machineTypes/n2-standard-8": {"name": "n2-standard-8", "guestCpus": 8},
        f"{p}/regions/europe-west1": {"name": "europe-west1", "quotas": [
            {"metric": "NVIDIA_H200_GPUS", "limit": 16.0, "usage": 8.0},
            {"metric": "PREEMPTIBLE_NVIDIA_H200_GPUS", "limit": 64.0, "usage": 0.0}]},
        f"{p}/zones/europe-west1-b/reservations/a3u-dense-reservation": {
            "name": "a3u-dense-reservation", "status": "READY",
            "specificReservation": {"count": "4", "inUseCount": "0",
                                    "instanceProperties": {"machineType": A3U}}},
        **{image.image: {"name": f"{role}-20261101", "status": "READY"} for role, image in catalog.gcp_images.items()},
    })
    yield fake
    fake.stop()


def gcp_stack(**pool_keys) -> StackConfig:
    data = copy.deepcopy(stack_spec("gcp-a3ultra-slurm"))
    data["pools"][0].update(pool_keys)
    return stack_of(data, **{"gcp:region": "europe-west1", "gcp:project": "aicluster-test"})


def test_gcp_live_checks_pass_on_the_fake_gce(fake_gce):
    report = run_preflight(gcp_stack())
    assert report.live and not report.failed, [(c.name, c.status, c.detail) for c in report.checks]
    for name in ("zone (live)", "offering pools[0] (live)", "reservation pools[0]"):
        assert by_name(report, name).status == "ok"
    assert any(c.name.startswith("image") and c.status == "ok" for c in report.checks)
    assert {c.path for c in fake_gce.calls if "machineTypes" in c.path} == \
        {f"/compute/v1/projects/aicluster-test/zones/europe-west1-b/machineTypes/{t}" for t in (A3U, "n2-standard-8")}


@pytest.mark.parametrize("capacity, metric, status", [
    ("on-demand", "NVIDIA_H200_GPUS", "failed"),
    ("spot", "PREEMPTIBLE_NVIDIA_H200_GPUS", "ok"),
])
def test_gcp_gpu_quota(fake_gce, capacity, metric, status):
    """2 x 8 H200 = 16 GPUs: on demand against a limit of 16 with 8 in use fails; spot counts the
    preemptible metric."""
    report = run_preflight(gcp_stack(capacity=capacity, max_nodes=2, min_nodes=0))
    check = by_name(report, f"quota {metric}")
    assert check.status == status and "need 16" in check.detail
    if status == "failed":
        assert "at least 24" in check.remedy and "console.cloud.google.com/iam-admin/quotas" in check.remedy


def test_gcp_missing_reservation_and_machine_type_fail(fake_gce):
    del fake_gce.resources["projects/aicluster-test/zones/europe-west1-b/reservations/a3u-dense-reservation"]
    del fake_gce.resources[f"projects/aicluster-test/zones/europe-west1-b/machineTypes/{A3U}"]
    report = run_preflight(gcp_stack())
    assert by_name(report, "reservation pools[0]").status == "failed"
    assert by_name(report, "offering pools[0] (live)").status == "failed"
    assert report.exit_code == 1


def test_gcp_head_machine_type_missing_in_the_zone_fails(fake_gce):
    del fake_gce.resources["projects/aicluster-test/zones/europe-west1-b/machineTypes/n2-standard-8"]
    report = run_preflight(gcp_stack())
    check = by_name(report, "offering head (live)")
    assert check.status == "failed" and check.path == "slurm.head_node.instance_type" and report.failed


def test_gcp_throttled_and_lost_answers_are_skipped_not_passed(fake_gce):
    fake_gce.throttle = {"/regions/europe-west1": 1}
    fake_gce.lose = {f"/machineTypes/{A3U}": 1}
    report = run_preflight(gcp_stack(capacity="spot"))
    quota = by_name(report, "quota GPUs")
    assert quota.status == "skipped" and "throttled" in quota.detail
    offering = by_name(report, "offering pools[0] (live)")
    assert offering.status == "skipped" and "no answer" in offering.detail
    assert not report.failed


def test_gcp_without_a_project_runs_offline(monkeypatch, no_cloud_credentials):
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "t")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    report = run_preflight(stack_of(GCP_MIN))
    assert not report.live and "gcp:project" in report.live_reason


def test_the_clouds_offering_overrules_an_aged_catalog_list(monkeypatch):
    """europe-west1-c is not in the catalog's a3-ultragpu-8g zones; when the live check finds the
    machine type there, the offline "not offered" stays as a note and fails nothing."""
    zone = "europe-west1-c"
    fake = FakeGcp(project="aicluster-test", zone=zone).start()
    try:
        monkeypatch.setenv("AICLUSTER_GCP_COMPUTE", f"{fake.base}/compute/v1")
        monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", TOKEN)
        p = "projects/aicluster-test"
        fake.resources.update({
            f"{p}/zones/{zone}": {"name": zone, "status": "UP"},
            f"{p}/zones/{zone}/machineTypes/{A3U}": {"name": A3U, "guestCpus": 224},
            f"{p}/zones/{zone}/machineTypes/n2-standard-8": {"name": "n2-standard-8", "guestCpus": 8},
        })
        data = copy.deepcopy(stack_spec("gcp-a3ultra-slurm"))
        data["zone"] = zone
        stack = stack_of(data, **{"gcp:region": "europe-west1", "gcp:project": "aicluster-test"})
        offline = by_name(run_preflight(stack, live=False), "offering pools[0]")
        assert offline.status == "failed"
        report = run_preflight(stack, live=True)
        assert by_name(report, "offering pools[0] (live)").status == "ok"
        overruled = by_name(report, "offering pools[0]")
        assert overruled.status == "ok" and "catalog list is out of date" in overruled.detail
    finally:
        fake.stop()
