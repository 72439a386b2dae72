"""Regions and zones (catalog/regions.yaml): an unknown region or a zone outside its region is bad
input for every command that reads a spec (exit 2, the YAML path, a close match), and the
catalog's lists are sourced, dated and agree with the SDK's own region list."""
from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import botocore
import pytest
import yaml

from aicluster.catalog import CatalogError
from aicluster.catalog.regions import load_places, places
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, GCP_MIN, STACK_NAMES, stack_spec
from tests.support.bad_specs import spec


def cli(*args: str) -> tuple[int, str, str]:
    from aicluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def stack_file(tmp_path: Path, data: dict) -> str:
    """A stack file whose provider region matches the spec's (so only the catalog can refuse it)."""
    config = {f"{data['cloud']}:region": data["region"], "aicluster:cluster": data}
    if data["cloud"] == "gcp":
        config["gcp:project"] = "p"
    path = tmp_path / "Pulumi.where.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return str(path)


def problem_line(err: str, path: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"  - {path}: ")]
    assert lines, err
    return lines[0]


# --- the spec ------------------------------------------------------------------------------------


def test_unknown_aws_region_is_refused_with_a_close_match():
    with pytest.raises(SpecError) as info:
        parse_spec(spec(region="us-east-3", zone="us-east-3a"))
    (p,) = info.value.problems
    assert p.path == "region" and p.value == "us-east-3"
    assert p.suggestion in ("us-east-1", "us-east-2")
    assert "regions.yaml" in p.allowed


@pytest.mark.parametrize("zone", ["us-east-1z", "us-west-2a", "us-east-1", "use1-az1"])
def test_zone_outside_its_region_is_refused(zone):
    with pytest.raises(SpecError) as info:
        parse_spec(spec(zone=zone))
    (p,) = info.value.problems
    assert p.path == "zone" and p.value == zone
    assert "us-east-1a, us-east-1b" in p.allowed and "us-east-1f" in p.allowed


def test_a_zone_letter_the_region_does_not_have_is_refused():
    """us-east-2 has three zones: the old shape check let us-east-2f through."""
    with pytest.raises(SpecError) as info:
        parse_spec(spec(region="us-east-2", zone="us-east-2f"))
    assert [p.path for p in info.value.problems] == ["zone"]


@pytest.mark.parametrize("region, zone, path, suggestion", [
    ("us-centrall1", "us-centrall1-a", "region", "us-central1"),
    ("europe-west1", "europe-west1-a", "zone", None),        # europe-west1 has b, c and d
    ("us-central1", "us-central1-e", "zone", None),
])
def test_gcp_regions_and_zones(region, zone, path, suggestion):
    with pytest.raises(SpecError) as info:
        parse_spec(spec(GCP_MIN, region=region, zone=zone))
    (p,) = info.value.problems
    assert p.path == path
    if suggestion:
        assert p.suggestion == suggestion
    if path == "zone":
        assert "europe-west1-b" in p.allowed or "us-central1-f" in p.allowed


@pytest.mark.parametrize("zone", ["us-east-1z", "us-east-1a"])
def test_eks_control_plane_zone_must_be_another_known_zone(zone):
    data = spec(scheduler="kubernetes", kubernetes={"control_plane_zone": zone, "api_access": "vpc"})
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    (p,) = info.value.problems
    assert p.path == "kubernetes.control_plane_zone" and p.suggestion == "us-east-1b"
    assert "us-east-1f" in p.allowed


def test_known_places_parse():
    parse_spec(spec(region="mx-central-1", zone="mx-central-1c"))
    parse_spec(spec(GCP_MIN, region="us-central2", zone="us-central2-b"))
    parse_spec(spec(scheduler="kubernetes", kubernetes={"control_plane_zone": "us-east-1f", "api_access": "vpc"}))


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_is_in_a_known_region_and_zone(stack):
    data = stack_spec(stack)
    known = places(data["cloud"])
    assert data["zone"] in known.zones[data["region"]]


# --- every command that reads a spec -------------------------------------------------------------


@pytest.mark.parametrize("command", ["plan", "check", "preflight"])
@pytest.mark.parametrize("where, path, fragment", [
    ({"region": "us-east-3", "zone": "us-east-3a"}, "region", "did you mean us-east-"),
    ({"zone": "us-east-1z"}, "zone", "inside region us-east-1"),
    ({"zone": "us-west-2a"}, "zone", "inside region us-east-1"),
])
def test_every_command_refuses_an_unknown_place_with_exit_2(tmp_path, command, where, path, fragment):
    code, out, err = cli(command, stack_file(tmp_path, spec(**where)))
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "internal error" not in err
    assert fragment in problem_line(err, path)


# --- the catalog itself ------------------------------------------------------------------------


def test_every_list_has_a_source_and_a_checked_date():
    for cloud, known in load_places().items():
        assert known.origin.source and known.origin.checked.startswith("20")
        for entry in known.offerings.values():
            assert entry.origin.source and entry.origin.checked.startswith("20"), (cloud, entry.name)


def test_aws_regions_are_the_sdks_commercial_china_and_govcloud_regions():
    """botocore's endpoints.json is the SDK's list of regions: ours must be exactly its aws, aws-cn
    and aws-us-gov partitions (a new region there fails this test until regions.yaml has it)."""
    data = json.loads((Path(os.path.dirname(botocore.__file__)) / "data" / "endpoints.json").read_text())
    sdk = {r for part in data["partitions"] if part["partition"] in ("aws", "aws-cn", "aws-us-gov")
           for r in part["regions"]}
    assert set(places("aws").zones) == sdk


def test_every_catalog_type_has_offering_data():
    from aicluster.catalog import load_catalog

    catalog = load_catalog()
    for cloud in ("aws", "gcp"):
        known = places(cloud)
        missing = [t for t in catalog.instance_types[cloud] if t not in known.offerings]
        assert not missing, (cloud, missing)
    assert not [t for t in catalog.tpus if t not in places("gcp").offerings]


def test_aws_offerings_match_moto_recorded_describe_instance_type_offerings():
    """The AWS offerings are moto's recording of DescribeInstanceTypeOfferings: the same regions."""
    import gzip

    import moto

    folder = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "region"
    known = places("aws")
    recorded = known.offerings["p5.48xlarge"].origin     # moto's recording; offerings_announced are not
    for region in known.offerings["p5.48xlarge"].covers:
        offered = {d["InstanceType"] for d in json.loads(gzip.open(folder / f"{region}.json.gz").read())}
        for name, entry in known.offerings.items():
            if entry.origin == recorded:
                assert (region in entry.places) == (name in offered), (name, region)
            else:
                assert name not in offered, f"moto now records {name}: move it to aws.offerings"


def test_a_list_without_source_is_refused(tmp_path, monkeypatch):
    import aicluster.catalog.regions as regions

    text = (Path(regions.__file__).parent / "regions.yaml").read_text()
    broken = text.replace("    checked: \"2026-11-28\"\n", "", 1)
    assert broken != text
    (tmp_path / "regions.yaml").write_text(broken)
    monkeypatch.setattr(regions, "_HERE", tmp_path)
    regions.load_places.cache_clear()
    try:
        with pytest.raises(CatalogError, match="checked"):
            regions.load_places()
    finally:
        regions.load_places.cache_clear()
