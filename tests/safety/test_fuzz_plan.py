"""Property: the whole `aicluster plan` path (YAML file -> spec -> design -> the real Pulumi
program under mocks -> report) ends in a plan or a clean SpecError, for ANY input. Never a
traceback, never an internal error (exit 1).

tests/test_fuzz_spec.py fuzzes spec -> design; this goes on through the program and the CLI:
- every spec from tests/support/fuzz.py's strategies (mostly broken, some valid) is planned
  (AICLUSTER_FUZZ_EXAMPLES examples; CI sets 2000);
- specs built valid on purpose, with awkward values where the spec allows them (names that
  collide with component names, unicode and template syntax in tags, many pools, extreme node
  counts, every capacity type), are planned and their rendered files must still parse;
- a share of the first goes through `aicluster plan FILE --format json` itself: exit 0 with
  JSON, or exit 2 with the problems on stderr and no traceback.
Shares: all of AICLUSTER_FUZZ_EXAMPLES for the first (2000 in CI), /4 for raw YAML values, /10
through the CLI, /40 for the valid-by-construction specs (each is a full plan).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.fuzz import EXAMPLES, VALID_SPECS, json_values, mutated_specs, plan_or_spec_error, spec_file

pytestmark = pytest.mark.filterwarnings("ignore")


def fuzz(share: int = 1):
    """Hypothesis settings for `EXAMPLES // share` examples (at least 10)."""
    return settings(max_examples=max(10, EXAMPLES // share), deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def cli_plan(path: str) -> tuple[int, str, str]:
    from aicluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", path, "--format", "json"])
    return code, out.getvalue(), err.getvalue()


def assert_clean_cli(path: str) -> int:
    code, out, err = cli_plan(path)
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 0:
        doc = json.loads(out)
        assert doc["plan"]["resources"] and "critical_path" in doc
    else:
        assert code == 2, f"exit {code}: {err}"
        assert err.startswith("invalid "), err
        assert out == ""
    return code


# --- 1. the spec fuzzer's inputs, planned ------------------------------------------------------


@fuzz()
@given(mutated_specs())
def test_mutated_spec_plans_or_raises_spec_error(data):
    with spec_file(data) as path:
        plan_or_spec_error(path)


@fuzz(share=4)
@given(json_values)
@example({"name": "x"})
@example([])
@example("pools: []")
def test_any_yaml_value_plans_or_raises_spec_error(data):
    with spec_file(data) as path:
        plan_or_spec_error(path)


# --- 2. valid specs with awkward values ---------------------------------------------------------

# Names that collide with what aicluster names its own components and children.
NAMES = ["gpu", "a", "network", "compute", "slurm", "slurm-config", "head", "fsx", "storage", "eks",
         "config", "nodes", "gpu-template", "x" * 24, "a1", "k8s", "default"]
AWS_TYPES = ["p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "trn2.48xlarge", "g5.48xlarge", "h100", "H100",
             "a100", "b200", "l40s", "trainium"]
GCP_TYPES = ["h100", "h200", "a100", "b200", "a3-megagpu-8g", "a3-ultragpu-8g"]
TAG_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                   max_size=63) | st.sampled_from(["{{ cluster }}", "${HOME}", "$(reboot)", "a: b", "'\"",
                                                   "line\nbreak", "#cloud-config", "- item", "&anchor *ref",
                                                   "%{x}", "\\", "ünïcödé", "🚀", ""])
TAG_KEY = st.text(alphabet=string.ascii_letters + string.digits + "-_.:/+=@ ", min_size=1, max_size=63).filter(
    lambda k: not k.lower().startswith(("aws:", "aicluster-")))
FSX_SIZES = [1200, 2400, 4800, 24000, 96000]


@st.composite
def valid_specs(draw):
    cloud = draw(st.sampled_from(["aws", "aws", "aws", "gcp"]))
    scheduler = draw(st.sampled_from(["slurm", "slurm", "kubernetes"]))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    pools = []
    for name in names:
        max_nodes = draw(st.sampled_from([1, 2, 16, 2048, 100_000]))
        pool = {"name": name, "instance_type": draw(st.sampled_from(AWS_TYPES if cloud == "aws" else GCP_TYPES)),
                "max_nodes": max_nodes, "min_nodes": draw(st.integers(0, min(max_nodes, 3)))}
        capacity = draw(st.sampled_from(["on-demand", "spot", "reservation", None]))
        if capacity == "reservation":
            pool["capacity"] = {"type": "reservation",
                                "reservation_id": "cr-0123456789abcdef0" if cloud == "aws" else "dense-res"}
        elif capacity:
            pool["capacity"] = capacity
        if cloud == "aws" and draw(st.booleans()):
            pool["efa"] = draw(st.booleans())
        pools.append(pool)
    spec = {"name": draw(st.sampled_from(["c", "p5-train", "x" * 32, "a-b-c"])).ljust(2, "z"), "cloud": cloud,
            "region": "us-east-1" if cloud == "aws" else "us-central1",
            "zone": "us-east-1a" if cloud == "aws" else "us-central1-a",
            "scheduler": scheduler, "pools": pools}
    storage = []
    for i in range(draw(st.integers(0, 3))):
        fs = {"name": draw(st.sampled_from(NAMES)) if i == 0 else f"fs{i}", "type": "lustre",
              "mount": f"/mnt/fs{i}" if i else "/fsx"}
        if cloud == "aws":
            fs |= {"capacity_gib": draw(st.sampled_from(FSX_SIZES)),
                   "throughput_mbps_per_tib": draw(st.sampled_from([125, 250, 500, 1000]))}
            if draw(st.booleans()):
                fs["import_path"] = "s3://example-bucket/" + draw(st.text(string.ascii_lowercase + "/-_", max_size=20))
        else:
            fs |= {"capacity_gib": 18000, "throughput_mbps_per_tib": 500}
        fs["protect"] = draw(st.booleans())
        storage.append(fs)
    if storage:
        spec["storage"] = storage
    network = {}
    if draw(st.booleans()):
        network["vpc_cidr"] = draw(st.sampled_from(["10.0.0.0/16", "172.16.0.0/20", "192.168.0.0/24"]))
    if draw(st.booleans()):
        network["ssh_ingress_cidrs"] = draw(st.sampled_from([["203.0.113.0/24"], ["0.0.0.0/0"],
                                                             ["198.51.100.7/32", "203.0.113.0/24"]]))
    if network:
        spec["network"] = network
    if draw(st.booleans()):
        spec["tags"] = draw(st.dictionaries(TAG_KEY, TAG_TEXT, max_size=4))
    if scheduler == "slurm" and draw(st.booleans()):
        spec["slurm"] = {"suspend_idle_min": draw(st.sampled_from([1, 10, 1440, 2.5])),
                         "accounting": draw(st.sampled_from([False, True, "head", "managed"]))}
    if draw(st.booleans()):
        spec["workload"] = {"model_params_b": draw(st.sampled_from([0.1, 7, 70, 405, 100_000]))}
    return spec


@fuzz(share=40)
@given(valid_specs())
@example({**VALID_SPECS[0], "pools": [{"name": f"p{i}", "instance_type": "h100", "max_nodes": 2} for i in range(64)]})
@example({"name": "tags", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
          "pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": 2}],
          "tags": {"team": "{{ cluster }}\n#cloud-config", "owner": "a: b", "x": "'\"\\"}})
def test_valid_spec_with_awkward_values_plans_with_parseable_files(data):
    with spec_file(data) as path:
        plan_or_spec_error(path)


# --- 3. the CLI itself ---------------------------------------------------------------------------


@fuzz(share=10)
@given(mutated_specs())
def test_cli_plan_exits_0_or_2_without_a_traceback(data):
    with spec_file(data) as path:
        assert_clean_cli(path)


def test_cli_fuzz_checks_can_fail():
    """The CLI assertion sees an internal error when there is one (exit 1 is never accepted)."""
    from unittest import mock

    with spec_file(VALID_SPECS[0]) as path:
        assert assert_clean_cli(path) == 0
        with mock.patch("aicluster.commands.planner.plan_stack", side_effect=KeyError("boom")):
            with pytest.raises(AssertionError):
                assert_clean_cli(path)


def test_examples_count_follows_the_environment():
    assert EXAMPLES == int(os.environ.get("AICLUSTER_FUZZ_EXAMPLES", 300))
