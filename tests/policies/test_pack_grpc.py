"""The real pack over gRPC, as `pulumi preview --policy-pack policies` runs it, against the offline bridge.

The Pulumi CLI starts a Python policy pack as `python -u -m pulumi.policy <engine> <pack dir>`; the
PolicyPack prints its port and serves the Analyzer service. This test starts it the same way, plays
the engine (GetAnalyzerInfo, Configure with the reconciled config, Analyze per resource, AnalyzeStack)
with the resources of an offline plan, and requires the same verdicts as `aicluster check`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from aicluster.commands.check import _program_plan
from aicluster.offline.capture import STACK_TYPE, UNKNOWN, plain_to_struct, reveal
from aicluster.offline.policy_bridge import _references, _state, load_rules, read_config_file, resolve_config, \
    run_policies
from aicluster.commands.planner import plan_stack

ROOT = Path(__file__).resolve().parents[2]
SEEDED = Path(__file__).parent / "seeded"
LEVELS = {"advisory": analyzer_pb2.ADVISORY, "mandatory": analyzer_pb2.MANDATORY,
          "disabled": analyzer_pb2.DISABLED, "remediate": analyzer_pb2.REMEDIATE}


@pytest.fixture(scope="module")
def analyzer():
    process = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", "policies"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = process.stdout.readline().strip()
        assert port.isdigit(), process.stderr.read()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=30)


def _options(r) -> analyzer_pb2.AnalyzerResourceOptions:
    return analyzer_pb2.AnalyzerResourceOptions(protect=r.protect, ignoreChanges=list(r.ignore_changes),
                                                additionalSecretOutputs=list(r.additional_secret_outputs),
                                                parent=r.parent_urn or "")


def _preview(plan, refs):
    """What a first `pulumi preview` knows: every value that refers to another resource (an id, ARN or
    self link the cloud assigns) is unknown, and so is the cloud-computed state; the engine still
    records which properties depend on which resources."""
    assigned = set()
    for r in plan.resources:
        state = _state(r)
        assigned |= {v for k, v in state.items() if k in ("id", "arn", "selfLink") and isinstance(v, str)}

    def blank(value):
        if isinstance(value, str) and value in assigned:
            return UNKNOWN
        if isinstance(value, dict):
            return {k: blank(v) for k, v in value.items()}
        if isinstance(value, list):
            return [blank(v) for v in value]
        return value

    def inputs(r):
        out = blank(reveal(r.inputs))
        # user data rendered from other resources' outputs (DNS names, mount names) is unknown too
        for key in ("userData", "userDataBase64"):
            if key in out and refs[r.urn]:
                out[key] = UNKNOWN
        return out
    return inputs


def _engine(stub, plan, config, preview: bool = False) -> dict[str, list[str]]:
    """Configure, Analyze every custom resource, AnalyzeStack: policy name -> violation messages."""
    stub.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={
        name: analyzer_pb2.PolicyConfig(enforcementLevel=LEVELS[c.enforcement.value],
                                        properties=plain_to_struct(c.properties))
        for name, c in config.items()}))
    found: dict[str, list[str]] = {}

    def collect(response):
        for d in response.diagnostics:
            found.setdefault(d.policyName, []).append(d.message)

    refs = _references(plan.resources)
    inputs = _preview(plan, refs) if preview else (lambda r: r.inputs)
    state = inputs if preview else _state
    for r in plan.resources:
        if r.custom and r.type != STACK_TYPE:
            collect(stub.Analyze(analyzer_pb2.AnalyzeRequest(type=r.type, properties=plain_to_struct(inputs(r)),
                                                             urn=r.urn, name=r.name, options=_options(r))))
    collect(stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[
        analyzer_pb2.AnalyzerResource(
            type=r.type, properties=plain_to_struct(state(r)), urn=r.urn, name=r.name, options=_options(r),
            parent=r.parent_urn or "", dependencies=list(r.dependencies),
            propertyDependencies={k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v) for k, v in refs[r.urn].items()})
        for r in plan.resources])))
    return found


def test_the_pack_describes_the_same_policies(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "aicluster-balanced-cluster" and info.supportsConfig
    by_name = {p.name: p for p in info.policies}
    for rule in load_rules():
        policy = by_name[rule.ID]
        assert policy.displayName == rule.POLICY.display_name
        assert policy.enforcementLevel == LEVELS[rule.POLICY.enforcement_level.value]
        assert policy.remediation_steps == rule.POLICY.remediation_steps
        schema = json_format.MessageToDict(policy.configSchema)
        assert set(schema.get("properties", {})) == set((rule.POLICY.config_schema.properties or {}))


PLANS = {
    "aws-p5-slurm": lambda: plan_stack("aws-p5-slurm").plan,
    "p5x64_on_small_fsx": lambda: plan_stack(str(SEEDED / "p5x64_on_small_fsx.yaml")).plan,
    "p5_without_efa_or_placement": lambda: _program_plan(SEEDED / "p5_without_efa_or_placement.py"),
    "world_open_ssh": lambda: _program_plan(SEEDED / "world_open_ssh.py"),
}


@pytest.mark.parametrize("preview", [False, True], ids=["known", "preview"])
@pytest.mark.parametrize("config_file", [None, "strict.json"])
@pytest.mark.parametrize("name", PLANS)
def test_the_engine_and_the_bridge_give_the_same_verdicts(analyzer, name, config_file, preview):
    """Same verdicts from the real pack over gRPC as from `aicluster check`, also when, as in a first
    preview, every cross-resource reference is unknown and only property dependencies link them."""
    policies = [r.POLICY for r in load_rules()]
    given = read_config_file(ROOT / "policies" / "config" / config_file) if config_file else None
    config = resolve_config(policies, given)
    plan = PLANS[name]()
    engine = _engine(analyzer, plan, config, preview=preview)
    assert not [m for ms in engine.values() for m in ms if "can't run policy" in m]
    offline = {v.rule_id: [x.message for x in v.violations] for v in run_policies(plan, config) if v.violations}
    assert set(engine) == set(offline), (engine, offline)
    for rule_id, messages in offline.items():
        # The analyzer prefixes each message with the policy's description.
        assert sorted(m.split("\n", 1)[1] for m in engine[rule_id]) == sorted(messages)


def test_retain_on_delete_is_judged_offline_only(analyzer, tmp_path):
    """The documented difference: the analyzer protocol has no retainOnDelete, so under the engine
    AIC-STO-005 sees `protect` only, while `aicluster check` also sees the captured option."""
    source = (SEEDED / "p5_without_efa_or_placement.py").read_text()
    copy = tmp_path / "unretained.py"
    copy.write_text(source.replace("retain_on_delete=True", "retain_on_delete=False"))
    plan = _program_plan(copy)
    config = resolve_config([r.POLICY for r in load_rules()])
    engine = _engine(analyzer, plan, config)
    offline = {v.rule_id: v for v in run_policies(plan, config)}
    assert "AIC-STO-005" not in engine
    assert offline["AIC-STO-005"].status == "fail"
    assert "retainOnDelete" in offline["AIC-STO-005"].violations[0].message


def test_the_pack_says_not_judged_for_unknown_user_data(analyzer):
    """As `pulumi preview --policy-pack policies` runs it: for user data still unknown, Analyze
    answers not-applicable for AIC-SEC-005 (with the reason), and no diagnostic (no pass, no violation)."""
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    response = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(
        type="aws:ec2/launchTemplate:LaunchTemplate", urn="urn:pulumi:s::p::aws:ec2/launchTemplate:LaunchTemplate::lt",
        name="lt", properties=plain_to_struct({"userData": UNKNOWN, "instanceType": "p5.48xlarge"}),
        options=analyzer_pb2.AnalyzerResourceOptions()))
    reasons = {n.policy_name: n.reason for n in response.not_applicable}
    assert reasons.get("AIC-SEC-005", "").startswith("not judged in preview: userData of 'lt'")
    assert not [d for d in response.diagnostics if d.policyName == "AIC-SEC-005"]
