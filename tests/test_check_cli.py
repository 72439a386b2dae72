"""`aicluster check` end to end: shipped stacks, the seeded failing cases, every output format, waivers,
bad input; `aicluster plan` with the verdicts; the pull-request workflow against GitHub's schema."""
from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

from aicluster import cli
from tests.support import ROOT, STACK_NAMES

SEEDED = ROOT / "tests" / "policies" / "seeded"
SARIF_SCHEMA = ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"   # vendored: its README.md
RULE_IDS = [f"AIC-{a}" for a in ("NET-001", "NET-002", "NET-003", "NET-004", "NET-005", "NET-006", "STO-001", "STO-002",
                                "STO-003", "STO-004", "STO-005", "STO-006", "MEM-001", "MEM-002", "CMP-001",
                                "CMP-002", "SEC-001", "SEC-002", "SEC-003", "SEC-004", "SEC-005", "SEC-006", "CST-001",
                                "CST-002", "CST-003")]
FUTURE, PAST = (dt.date.today() + dt.timedelta(days=30)).isoformat(), "2020-01-31"


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------- shipped stacks


def test_all_shipped_stacks_pass_with_one_line_per_rule(capsys):
    code, out, err = check(capsys, "--all")
    assert code == 0, out + err
    for stack in STACK_NAMES:
        block = out.split(f"stack {stack} ")[1].split("\nstack ")[0]
        lines = [line for line in block.splitlines() if re.match(r"\s+(PASS|FAIL|WARN|N/A|OFF|WAIVED)\s+AIC-", line)]
        assert [re.search(r"AIC-\w+-\d+", line).group() for line in lines] == RULE_IDS
        assert not any(line.split()[0] == "FAIL" for line in lines)
    assert out.rstrip().endswith("0 mandatory violations, 0 advisory, 0 waived -> exit 0")


def test_check_through_the_installed_command():
    run = subprocess.run([sys.executable, "-m", "aicluster.cli", "check", "--stack", "aws-p4d-small"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS   AIC-STO-006 workload-storage (mandatory)" in run.stdout   # the stack describes its model
    assert "N/A    AIC-STO-002 storage-throughput-floor (mandatory): superseded by AIC-STO-006" in run.stdout


# ---------------------------------------------------------------- the seeded cases


SEEDED_CASES = [
    ("model_70b_on_one_p5.yaml", "AIC-MEM-001",
     ["70B parameters", "1 x p5.48xlarge = 8 GPUs with 640 GiB HBM", "training state 1120 GB (16 B/param) exceeds 550 GB"]),
    ("p5x64_on_small_fsx.yaml", "AIC-STO-002",
     ["0.15 GB/s for 512 GPUs = 0.29 MB/s per GPU < 58.6 MB/s floor", "1200 GiB x 125 MB/s/TiB"]),
    ("model_405b_on_two_p5.yaml", "AIC-MEM-002",
     ["2 x p5.48xlarge (16 H100): 405.8B parameters (tags on gpu): no layout runs", "80 GiB"]),
    ("described_70b_on_small_fsx.yaml", "AIC-STO-006",
     ["16 x p5.48xlarge (128 H100): 70.6B parameters (tags on gpu)", "fsx-fs 0.15 GB/s",
      "of a 30 min interval (budget 5 %)"]),
    ("p5_without_efa_or_placement.py", "AIC-NET-001",
     ["0 of 32 EFA devices wired", "0 Gbps per GPU, 0% of p5.48xlarge's 3200 Gbps fabric"]),
    ("p5_without_efa_or_placement.py", "AIC-NET-002",
     ["8 EFA-capable nodes in no placement group"]),
    ("world_open_ssh.py", "AIC-SEC-004", ["opens SSH (tcp/22) to the internet: ingress[0] tcp 22 from 0.0.0.0/0"]),
    ("imdsv1_launch_template.py", "AIC-SEC-001", ["metadataOptions.httpTokens is 'optional'"]),
]


@pytest.mark.parametrize("name, rule_id, numbers", SEEDED_CASES, ids=[f"{c[0]}-{c[1]}" for c in SEEDED_CASES])
def test_seeded_case_fails_with_its_rule_and_numbers(capsys, name, rule_id, numbers):
    code, out, err = check(capsys, str(SEEDED / name))
    assert code == 1, out + err
    lines = out.splitlines()
    # the rule's own line (another rule's N/A reason may name it)
    at = next(i for i, line in enumerate(lines) if re.match(rf"\s+\S+\s+{rule_id} ", line))
    assert lines[at].split()[0] == "FAIL"
    block = "\n".join(itertools.takewhile(lambda line: line.startswith("         "), lines[at + 1:]))
    for text in numbers:
        assert text in block, block


def test_seeded_cases_fail_through_the_installed_command():
    run = subprocess.run([sys.executable, "-m", "aicluster.cli", "check", str(SEEDED / "p5x64_on_small_fsx.yaml")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1
    assert "AIC-STO-002" in run.stdout and "0.29 MB/s per GPU < 58.6 MB/s floor" in run.stdout


# ---------------------------------------------------------------- formats


@pytest.fixture(scope="module")
def sarif_schema():
    assert SARIF_SCHEMA.is_file(), f"missing {SARIF_SCHEMA}"
    return json.loads(SARIF_SCHEMA.read_text())


@pytest.mark.parametrize("target", [["--all"], [str(SEEDED / "p5_without_efa_or_placement.py")],
                                    [str(SEEDED / "p5x64_on_small_fsx.yaml")]])
def test_sarif_validates_against_the_sarif_2_1_0_schema(capsys, sarif_schema, target):
    code, out, _ = check(capsys, *target, "--format", "sarif")
    doc = json.loads(out)
    jsonschema.Draft7Validator(sarif_schema).validate(doc)
    run = doc["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == RULE_IDS
    assert all(r["help"]["text"] for r in run["tool"]["driver"]["rules"])
    assert run["invocations"][0]["exitCode"] == code
    for result in run["results"]:
        assert result["ruleId"] in RULE_IDS and result["level"] in ("error", "warning")
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert (ROOT / uri).is_file(), uri


def test_sarif_points_at_the_pool_in_the_spec(capsys):
    _, out, _ = check(capsys, str(SEEDED / "model_70b_on_one_p5.yaml"), "--format", "sarif")
    (result,) = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "AIC-MEM-001"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "tests/policies/seeded/model_70b_on_one_p5.yaml"
    line = (SEEDED / "model_70b_on_one_p5.yaml").read_text().splitlines()[location["region"]["startLine"] - 1]
    assert "name: gpu" in line


def test_junit_parses_with_a_testcase_per_rule(capsys):
    code, out, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--format", "junit")
    assert code == 1
    root = ET.fromstring(out.split("\n", 1)[1] if out.startswith("<?xml") else out)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name").split()[0] for c in cases] == RULE_IDS
    failures = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["AIC-SEC-004 no-world-open-ssh"]
    assert "0.0.0.0/0" in failures[0].find("failure").text
    assert int(suite.get("tests")) == len(RULE_IDS) and int(suite.get("failures")) == 1
    assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None) > 0


def test_json_format(capsys):
    code, out, _ = check(capsys, "--all", "--format", "json")
    doc = json.loads(out)
    assert code == doc["exit_code"] == 0
    assert [s["stack"] for s in doc["stacks"]] == STACK_NAMES
    assert [r["id"] for r in doc["stacks"][0]["rules"]] == RULE_IDS
    assert {r["status"] for s in doc["stacks"] for r in s["rules"]} <= {"pass", "n/a", "warn"}


def test_markdown_format(capsys):
    _, out, _ = check(capsys, str(SEEDED / "imdsv1_launch_template.py"), "--format", "markdown")
    assert out.startswith("## aicluster check")
    assert "| `AIC-SEC-001` | imdsv2-required | mandatory | FAIL |" in out


def test_github_format_annotates_the_file(capsys):
    code, out, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--format", "github")
    assert code == 1
    (error,) = [line for line in out.splitlines() if line.startswith("::error ")]
    assert error.startswith("::error file=tests/policies/seeded/world_open_ssh.py,line=")
    assert "title=AIC-SEC-004 no-world-open-ssh (world_open_ssh)::" in error
    assert out.splitlines()[-1].startswith("::notice title=aicluster check::")


# ---------------------------------------------------------------- waivers


def _waivers(tmp_path, *entries) -> str:
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump({"waivers": list(entries)}))
    return str(path)


def test_an_active_waiver_waives_and_the_check_passes(capsys, tmp_path):
    waivers = _waivers(tmp_path, {"rule": "AIC-SEC-004", "resource": "handmade-bastion",
                                  "reason": "bastion behind a lab firewall until the SSM rollout", "expires": FUTURE})
    code, out, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--waivers", waivers)
    assert code == 0, out
    assert "WAIVED AIC-SEC-004" in out and "bastion behind a lab firewall" in out
    _, sarif, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--waivers", waivers, "--format", "sarif")
    (result,) = json.loads(sarif)["runs"][0]["results"]
    assert result["suppressions"][0]["kind"] == "external"


def test_an_expired_waiver_fails_the_check(capsys, tmp_path):
    waivers = _waivers(tmp_path, {"rule": "AIC-SEC-004", "resource": "*",
                                  "reason": "bastion behind a lab firewall until the SSM rollout", "expires": PAST})
    code, out, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--waivers", waivers)
    assert code == 1
    assert "EXPIRED waiver #1 (AIC-SEC-004 on *, expires 2020-01-31)" in out
    assert "FAIL   AIC-SEC-004" in out
    # Expired even where it matches nothing: a passing stack still fails.
    code, out, _ = check(capsys, "--stack", "aws-p4d-small", "--waivers", waivers)
    assert code == 1 and "1 expired waiver" in out
    _, junit, _ = check(capsys, "--stack", "aws-p4d-small", "--waivers", waivers, "--format", "junit")
    assert ET.fromstring(junit.split("\n", 1)[1]).find("testsuite[@name='aicluster.waivers']/testcase/failure") is not None


def test_a_waiver_for_another_resource_or_stack_does_not_waive(capsys, tmp_path):
    waivers = _waivers(tmp_path, {"rule": "AIC-SEC-004", "resource": "other-*", "reason": "a different bastion host",
                                  "expires": FUTURE},
                       {"rule": "AIC-SEC-004", "resource": "*", "stack": "aws-*", "reason": "only the aws stacks",
                        "expires": FUTURE})
    code, out, _ = check(capsys, str(SEEDED / "world_open_ssh.py"), "--waivers", waivers)
    assert code == 1 and "unused  waiver #1" in out and "unused  waiver #2" in out


@pytest.mark.parametrize("entry, expected", [
    ({"rule": "AIC-SEC-04", "resource": "x", "reason": "long enough reason", "expires": FUTURE},
     "waivers[0].rule: 'AIC-SEC-04' is not valid; a rule id of the pack (did you mean AIC-SEC-004?)"),
    ({"rule": "AIC-SEC-004", "resource": "x", "reason": "long enough reason"}, "waivers[0].expires: None"),
    ({"rule": "AIC-SEC-004", "resource": "x", "reason": "short", "expires": FUTURE}, "waivers[0].reason"),
    ({"rule": "AIC-SEC-004", "resource": "x", "reason": "long enough reason", "expires": "next week"},
     "waivers[0].expires: 'next week'"),
    ({"rule": "AIC-SEC-004", "resource": "x", "reason": "long enough reason", "expires": FUTURE, "owner": "me"},
     "waivers[0].owner"),
])
def test_a_bad_waiver_file_is_bad_input(capsys, tmp_path, entry, expected):
    code, out, err = check(capsys, "--stack", "aws-p4d-small", "--waivers", _waivers(tmp_path, entry))
    assert code == 2 and expected in err and "Traceback" not in err
    assert out == ""


# ---------------------------------------------------------------- config and bad input


def test_strict_config_fails_the_shipped_stacks_on_the_better_floor(capsys, tmp_path):
    # With only model_params_b, AIC-STO-002 judges the floor (a described model: AIC-STO-006 instead).
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml").read_text())
    doc["config"]["aicluster:cluster"]["workload"] = {"model_params_b": 70}
    path = tmp_path / "Pulumi.aws-p5-slurm.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, _ = check(capsys, str(path), "--config", str(ROOT / "policies/config/strict.json"))
    assert code == 1
    assert "11.72 GB/s for 128 GPUs = 91.55 MB/s per GPU < 156.2 MB/s floor" in out


def test_config_can_disable_a_rule_and_downgrade_another(capsys, tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"AIC-NET-001": "disabled", "AIC-NET-002": {"enforcementLevel": "advisory"}}))
    code, out, _ = check(capsys, str(SEEDED / "p5_without_efa_or_placement.py"), "--config", str(config))
    assert code == 0, out
    assert "OFF    AIC-NET-001" in out and "WARN   AIC-NET-002" in out


@pytest.mark.parametrize("doc, expected", [
    ({"AIC-STO-02": "advisory"}, "AIC-STO-02: 'AIC-STO-02' is not valid; a rule id of this pack"),
    ({"AIC-STO-002": {"floorMbps": 10}}, "(did you mean floorMbpsPerAccelerator?)"),
    ({"AIC-STO-002": {"floorMbpsPerAccelerator": "fast"}}, "AIC-STO-002.floorMbpsPerAccelerator: 'fast'"),
    ({"AIC-STO-002": "strict"}, "AIC-STO-002.enforcementLevel: 'strict' is not valid"),
])
def test_a_bad_policy_config_is_bad_input(capsys, tmp_path, doc, expected):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(doc))
    code, _, err = check(capsys, "--stack", "aws-p4d-small", "--config", str(config))
    assert code == 2 and expected in err, err


@pytest.mark.parametrize("args, expected", [
    (["--stack", "aws-p5-slrum"], "did you mean aws-p5-slurm"),
    (["--config", "nope.json"], "an existing policy config JSON file"),
    (["--stack", "aws-p5-slurm", "--all"], "one of FILE, --stack NAME or --all"),
    (["missing.py"], "an existing Pulumi program"),
])
def test_bad_arguments_exit_2(capsys, args, expected):
    code, _, err = check(capsys, *args)
    assert code == 2 and expected in err


def test_a_broken_program_is_bad_input(capsys, tmp_path):
    program = tmp_path / "broken.py"
    program.write_text("import pulumi_aws as aws\naws.ec2.Vpc('v', cidr_blok='10.0.0.0/16')\n")
    code, _, err = check(capsys, str(program))
    assert code == 2 and "a Pulumi program that runs offline" in err and "cidr_blok" in err


# ---------------------------------------------------------------- aicluster plan shows the verdicts


def test_plan_text_shows_the_verdicts_beside_the_balance_report(capsys):
    assert cli.main(["plan", "--stack", "aws-p5-slurm"]) == 0
    out = capsys.readouterr().out
    balance = out.index("\nBalance\n")
    policy = out.index("\nPolicy pack")
    assert policy > balance
    assert "PASS   AIC-STO-006 workload-storage (mandatory)" in out[policy:]   # the stack describes its model
    assert "N/A    AIC-STO-002 storage-throughput-floor (mandatory): superseded by AIC-STO-006" in out[policy:]


def test_plan_markdown_has_a_mermaid_diagram_and_the_verdicts(capsys):
    assert cli.main(["plan", str(SEEDED / "p5x64_on_small_fsx.yaml"), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    diagram = out.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert diagram.startswith("flowchart LR")
    for text in ("64 x p5.48xlarge", "EFA", "placement group", "FSx for Lustre PERSISTENT_2", "Slurm head node"):
        assert text in diagram, text
    assert "| `AIC-STO-002` | storage-throughput-floor | mandatory | FAIL |" in out


def test_plan_markdown_diagram_labels_each_filesystem_by_its_kind(capsys):
    """Filestore is NFS with a tier and a capacity, no per-TiB throughput; Managed Lustre keeps its throughput."""
    assert cli.main(["plan", "--stack", "gcp-a3mega-slurm", "--format", "markdown"]) == 0
    diagram = capsys.readouterr().out.split("```mermaid\n", 1)[1].split("```", 1)[0]
    nodes = {line.split("[(", 1)[0].strip(): line for line in diagram.splitlines() if "[(" in line}
    scratch, home = (next(v for v in nodes.values() if f'"{name}: ' in v) for name in ("scratch", "home"))
    assert "Managed Lustre" in scratch and "36000 GiB x 500 MB/s/TiB" in scratch and "GB/s" in scratch
    assert "Filestore" in home and "(NFS)" in home and " GiB" in home
    assert "Lustre" not in home and "MB/s" not in home and "GB/s" not in home


def test_plan_json_carries_the_verdicts(capsys):
    assert cli.main(["plan", "--stack", "aws-p4d-small", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in doc["policy"]] == RULE_IDS


# ---------------------------------------------------------------- the pull-request workflow


WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_workflows_validate_against_the_github_workflow_schema():
    assert WORKFLOWS
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        run = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema,
                              *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr


def test_the_pull_request_workflow_tests_checks_uploads_and_previews():
    text = (ROOT / ".github" / "workflows" / "pull-request.yml").read_text()
    doc = yaml.safe_load(text)
    assert "pull_request" in doc[True]                  # YAML 1.1 reads the `on` key as True
    steps = {job: [s.get("run", "") + s.get("uses", "") for s in spec["steps"]] for job, spec in doc["jobs"].items()}
    assert any(".ci/run" in s for s in steps["test"])
    assert any("aicluster check --all" in s and "--format sarif" in s for s in steps["policy"])
    assert any(s.startswith("github/codeql-action/upload-sarif") for s in steps["policy"])
    assert doc["jobs"]["policy"]["permissions"]["security-events"] == "write"
    assert any("pulumi preview" in s and "--policy-pack policies" in s for s in steps["preview"])
    assert "AWS_ROLE_TO_ASSUME" in doc["jobs"]["preview"]["env"]


def test_the_workflow_runs_the_suite_as_root_on_the_ci_base_like_ci_run():
    """The real-daemon tests need root (slurmctld, munged, MariaDB, the trixie chroot): the test job
    runs .ci/run itself, in a Debian bookworm container (root), with no `make test` of its own."""
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "pull-request.yml").read_text())
    job = doc["jobs"]["test"]
    container = job.get("container") or {}
    image = container if isinstance(container, str) else container.get("image", "")
    assert image.startswith("debian:bookworm"), "the suite runs as root on the CI base (Debian bookworm)"
    assert "--user" not in (container.get("options", "") if isinstance(container, dict) else "")
    runs = [s.get("run", "") for s in job["steps"]]
    assert any(re.search(r"(^|\s)(bash )?\.ci/run\b", r) for r in runs)
    assert not any("make test" in r for r in runs), "the workflow runs what .ci/run runs, not its own variant"
    assert job["timeout-minutes"] >= 90, "CI's own limit for .ci/run is 90 minutes"
