"""`aicluster up`, `preview` and `status` (commands/deploy.py) over a fake Automation API stack
(automation.STACK_OPENER), and the backend and passphrase checks of commands/automation.py. No
Pulumi CLI is needed: the one test that runs the real opener checks that its absence exits 2."""
from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field

import pytest
import yaml
from pulumi.automation import errors as automation_errors
from pulumi.automation._cmd import CommandResult

from aicluster import cli
from aicluster.commands import automation
from aicluster.commands.automation import StackRef, check_backend
from aicluster.commands.deploy import login_commands
from aicluster.commands.planner import plan_stack
from aicluster.errors import SpecError
from tests.support import AWS_MIN


@dataclass
class FakeStack:
    """The automation Stack's methods that deploy.py calls, recording each call."""
    calls: list = field(default_factory=list)
    resources: list = field(default_factory=list)       # the state's resources (export_stack)
    outputs_: dict = field(default_factory=dict)
    fail_with: Exception | None = None

    def _record(self, name, on_output=None):
        self.calls.append(name)
        if self.fail_with is not None:
            raise self.fail_with
        if on_output is not None:
            on_output(f"pulumi {name}: streamed line")

    def up(self, on_output=None):
        self._record("up", on_output)
        return types.SimpleNamespace(summary=types.SimpleNamespace(result="succeeded"))

    def preview(self, on_output=None):
        self._record("preview", on_output)

    def outputs(self):
        self.calls.append("outputs")
        return self.outputs_

    def export_stack(self):
        self.calls.append("export_stack")
        return types.SimpleNamespace(version=3, deployment={"resources": self.resources})


@pytest.fixture
def fake(monkeypatch):
    stack = FakeStack()
    opened: list = []

    def opener(ref, create):
        opened.append((ref, create))
        stack.calls.append(f"open(create={create})")
        return stack

    monkeypatch.setattr(automation, "STACK_OPENER", opener)
    stack.opened = opened
    return stack


@pytest.fixture
def preflight(monkeypatch):
    """A stand-in aicluster.commands.preflight: its report fails when `failing` names checks."""
    seen: dict = {"calls": [], "failing": [], "live": []}

    def run_preflight(stack_config, live=None):
        seen["calls"].append(stack_config)
        seen["live"].append(live)
        checks = [types.SimpleNamespace(name="quota", status="ok"),
                  *[types.SimpleNamespace(name=name, status="failed") for name in seen["failing"]]]
        return types.SimpleNamespace(checks=checks, failed=bool(seen["failing"]))

    def render_text(report):
        return "\n".join(f"{c.name}: {'FAILED' if c.status == 'failed' else 'ok'}" for c in report.checks)

    try:       # the real module (commands/preflight.py): only its run_preflight is replaced
        import aicluster.commands.preflight as module
    except ModuleNotFoundError:
        module = types.ModuleType("aicluster.commands.preflight")
        module.add_parser = lambda sub: None
        monkeypatch.setitem(sys.modules, "aicluster.commands.preflight", module)
    monkeypatch.setattr(module, "run_preflight", run_preflight, raising=False)
    monkeypatch.setattr(module, "render_text", render_text, raising=False)
    return seen


def _project(tmp_path, monkeypatch, spec: dict | None = None, extra: dict | None = None):
    """A user's project with one stack `dev`, the working directory inside it."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: proj\nruntime: python\nmain: __main__.py\n")
    spec = spec or {**AWS_MIN, "name": "demo"}
    config = {f"{spec['cloud']}:region": spec["region"], **(extra or {}), "aicluster:cluster": spec}
    (folder / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    monkeypatch.chdir(folder)
    return folder


def test_preview_plans_offline_then_streams_pulumis_preview(tmp_path, monkeypatch, fake, capsys, preflight):
    folder = _project(tmp_path, monkeypatch)
    assert cli.main(["preview"]) == 0
    assert fake.opened == [(StackRef(folder.resolve(), "dev"), True)]
    assert fake.calls == ["open(create=True)", "preview"]
    out = capsys.readouterr().out
    assert "planned dev offline" in out and "pulumi preview: streamed line" in out
    assert preflight["calls"] == []                   # preview changes nothing: no preflight


def test_the_first_up_runs_preflight_and_a_failure_blocks_it(tmp_path, monkeypatch, fake, capsys, preflight):
    _project(tmp_path, monkeypatch)
    preflight["failing"] = ["capacity"]
    assert cli.main(["up"]) == 1
    assert "up" not in fake.calls
    assert [c.name for c in preflight["calls"]] == ["dev"]
    captured = capsys.readouterr()
    assert "capacity: FAILED" in captured.out and "--skip-preflight" in captured.err


def test_the_first_up_deploys_after_a_passing_preflight(tmp_path, monkeypatch, fake, capsys, preflight):
    _project(tmp_path, monkeypatch)
    assert cli.main(["up"]) == 0
    assert fake.calls == ["open(create=True)", "export_stack", "up"]
    assert len(preflight["calls"]) == 1 and preflight["live"] == [True]     # the cloud's own answers
    out = capsys.readouterr().out
    assert out.index("quota: ok") < out.index("pulumi up: streamed line")
    assert "succeeded" in out


def test_a_deployed_stack_updates_without_preflight(tmp_path, monkeypatch, fake, preflight):
    _project(tmp_path, monkeypatch)
    fake.resources = [{"type": "pulumi:pulumi:Stack", "urn": "urn:pulumi:dev::proj::pulumi:pulumi:Stack::proj-dev"}]
    assert cli.main(["up"]) == 0
    assert fake.calls[-1] == "up" and preflight["calls"] == []


def test_skip_preflight_deploys_a_new_stack_without_it(tmp_path, monkeypatch, fake, preflight):
    _project(tmp_path, monkeypatch)
    preflight["failing"] = ["quota"]
    assert cli.main(["up", "--skip-preflight"]) == 0
    assert fake.calls[-1] == "up" and preflight["calls"] == []


def test_a_bad_spec_exits_2_before_any_stack_call(tmp_path, monkeypatch, fake, capsys):
    _project(tmp_path, monkeypatch, {**AWS_MIN, "pools": [{**AWS_MIN["pools"][0], "max_nodes": 0}]})
    for command in ("up", "preview"):
        assert cli.main([command]) == 2
        err = capsys.readouterr().err
        assert "pools[0].max_nodes" in err and "Traceback" not in err
    assert fake.calls == []


def test_a_gcp_stack_without_a_real_project_exits_2_before_pulumi(tmp_path, monkeypatch, fake, capsys):
    for name in ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    spec = {"name": "gcpdemo", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
            "pools": [{"name": "gpu", "instance_type": "h100", "max_nodes": 2}]}
    _project(tmp_path, monkeypatch, spec, {"gcp:project": "example-ml-project"})
    assert cli.main(["up"]) == 2
    assert "pulumi config set gcp:project" in capsys.readouterr().err
    assert fake.calls == []


def test_a_project_without_its_virtualenv_says_how_to_make_it(tmp_path, monkeypatch, fake, capsys):
    folder = _project(tmp_path, monkeypatch)
    (folder / "Pulumi.yaml").write_text("name: proj\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")
    assert cli.main(["up"]) == 2
    assert "python -m venv venv" in capsys.readouterr().err
    assert fake.calls == []
    (folder / "venv").mkdir()
    assert cli.main(["preview"]) == 0 and fake.calls[-1] == "preview"


def test_without_the_pulumi_cli_up_exits_2_with_the_install_hint(tmp_path, monkeypatch, capsys):
    _project(tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(automation, "STACK_OPENER", automation._real_opener)
    for command in (["up"], ["preview"], ["status"]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert "get.pulumi.com" in err and "Traceback" not in err, command


def test_a_failed_pulumi_up_exits_1_with_pulumis_message(tmp_path, monkeypatch, fake, capsys):
    _project(tmp_path, monkeypatch)
    fake.resources = [{"type": "aws:ec2/vpc:Vpc"}]
    fake.fail_with = automation_errors.CommandError(CommandResult("", "error: InsufficientInstanceCapacity", 255))
    assert cli.main(["up"]) == 1
    err = capsys.readouterr().err
    assert "pulumi up failed" in err and "InsufficientInstanceCapacity" in err and "internal error" not in err


def test_a_missing_passphrase_inside_pulumi_says_what_to_set(tmp_path, monkeypatch, fake, capsys):
    _project(tmp_path, monkeypatch)
    fake.resources = [{"type": "aws:ec2/vpc:Vpc"}]
    fake.fail_with = automation_errors.CommandError(CommandResult(
        "", "error: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE", 255))
    assert cli.main(["up"]) == 2
    err = capsys.readouterr().err
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" in err and "pulumi login --local" in err


@pytest.mark.parametrize("env, credentials, refused", [
    ({"PULUMI_BACKEND_URL": "file:///state"}, None, "PULUMI_CONFIG_PASSPHRASE"),
    ({"PULUMI_BACKEND_URL": "file:///state", "PULUMI_CONFIG_PASSPHRASE": ""}, None, None),   # empty is a passphrase
    ({"PULUMI_BACKEND_URL": "s3://bucket", "PULUMI_CONFIG_PASSPHRASE_FILE": "/p"}, None, None),
    ({"PULUMI_BACKEND_URL": "https://api.pulumi.com"}, None, None),       # Pulumi Cloud keeps the secrets key
    ({}, {"current": "file://~"}, "PULUMI_CONFIG_PASSPHRASE"),              # `pulumi login --local`
    ({}, None, "pulumi login"),                                              # never logged in
    ({"PULUMI_ACCESS_TOKEN": "pul-x"}, None, None),
])
def test_the_backend_check_before_the_cli_runs(tmp_path, env, credentials, refused):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: proj\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"aicluster:cluster": {}}}))
    home = tmp_path / "pulumi-home"
    home.mkdir()
    if credentials is not None:
        (home / "credentials.json").write_text(json.dumps(credentials))
    ref = StackRef(folder, "dev")
    if refused is None:
        check_backend(ref, {**env, "PULUMI_HOME": str(home)})
    else:
        with pytest.raises(SpecError, match=refused):
            check_backend(ref, {**env, "PULUMI_HOME": str(home)})


def test_a_kms_secrets_provider_needs_no_passphrase(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: proj\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text("secretsprovider: awskms://alias/pulumi\nconfig:\n  aicluster:cluster: {}\n")
    check_backend(StackRef(folder, "dev"), {"PULUMI_BACKEND_URL": "s3://b", "PULUMI_HOME": str(tmp_path)})


# ------------------------------------------------------------------------------------ status


def test_status_prints_outputs_hides_secrets_and_the_ssm_login(tmp_path, monkeypatch, fake, capsys):
    _project(tmp_path, monkeypatch)
    secret = types.SimpleNamespace(value="s3cr3t", secret=True)
    access = {"cluster": "demo", "cloud": "aws", "scheduler": "slurm", "region": "us-east-1",
              "zone": "us-east-1a", "head": "demo-head"}
    fake.outputs_ = {"vpc_id": types.SimpleNamespace(value="vpc-1", secret=False), "token": secret,
                     "access": types.SimpleNamespace(value=access, secret=False)}
    fake.resources = [{"type": "aws:ec2/instance:Instance", "id": "i-0login", "outputs": {"tags": {"Name": "demo-login-1"}}},
                      {"type": "aws:ec2/instance:Instance", "id": "i-0head", "outputs": {"tags": {"Name": "demo-head"}}}]
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "vpc_id: vpc-1" in out and "s3cr3t" not in out and "token: [secret]" in out
    assert "aws ssm start-session --target i-0head --region us-east-1" in out
    assert fake.opened[0][1] is False                     # status never creates a stack
    assert cli.main(["status", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stack"] == "dev" and doc["outputs"]["token"] == "[secret]"
    assert doc["login"][0] == "aws ssm start-session --target i-0head --region us-east-1"
    assert "up" not in fake.calls and "preview" not in fake.calls


def test_status_of_a_stack_never_deployed_exits_2(tmp_path, monkeypatch, capsys):
    _project(tmp_path, monkeypatch)

    def opener(ref, create):
        raise automation_errors.StackNotFoundError(CommandResult("", "error: no stack named 'dev' found", 255))

    monkeypatch.setattr(automation, "STACK_OPENER", opener)
    assert cli.main(["status"]) == 2
    assert "aicluster up" in capsys.readouterr().err


def test_status_of_an_older_stack_reads_the_facts_from_the_spec(tmp_path, monkeypatch, fake, capsys):
    _project(tmp_path, monkeypatch)          # outputs without `access`: deployed before it was exported
    fake.outputs_ = {"vpc_id": "vpc-1"}
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "Values=demo-head" in out and "aws ssm start-session" in out   # no id in the state: how to find it


@pytest.mark.parametrize("stack, expected", [
    ("aws-p5-slurm", "aws ssm start-session --target i-0head --region us-east-1"),
    ("aws-p5-eks", "aws eks update-kubeconfig --name EKS --region us-east-1"),
    ("gcp-a3mega-slurm", "gcloud compute ssh a3mega-train-head --tunnel-through-iap --zone us-east4-a "
                         "--project example-ml-project"),
    ("gcp-a3ultra-gke", "gcloud container clusters get-credentials GKE --region europe-west1 "
                        "--project example-ml-project"),
])
def test_the_login_line_from_the_programs_own_exports(stack, expected):
    """The facts come from the program's `access` export (cluster.py), as planned offline."""
    result = plan_stack(stack)
    access = result.plan.outputs["access"]
    head = {"type": "aws:ec2/instance:Instance", "id": "i-0head", "outputs": {"tags": {"Name": access.get("head")}}}
    outputs = {"eks_cluster": "EKS", "gke_cluster": "GKE"}
    assert login_commands(access, outputs, [head])[0] == expected


def test_the_real_preflight_without_credentials_blocks_the_first_up(tmp_path, monkeypatch, fake, capsys):
    """commands/preflight.py itself: `up` asks for the live checks, and with no AWS credentials the
    `credentials` check fails, so nothing is deployed."""
    pytest.importorskip("aicluster.commands.preflight")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _project(tmp_path, monkeypatch)
    assert cli.main(["up"]) == 1
    captured = capsys.readouterr()
    assert "credentials" in captured.out and "--skip-preflight" in captured.err
    assert fake.calls == ["open(create=True)", "export_stack"]
