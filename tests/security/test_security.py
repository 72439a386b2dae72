"""SECURITY.md, enforced on every example stack (and on specs with the options that open things
up), plus proof that each check fails on the mistake it exists for."""
from __future__ import annotations

import copy
import json

import pytest

from tests.support import checks
from aicluster.offline.capture import CapturedResource, Secret
from tests.support.stack_plans import STACK_NAMES, result_with_spec, stack_result, stack_spec_data

CHECKS = {
    "no-world-ingress": lambda r: checks.world_ingress(r.plan.resources, _spec(r)),
    "no-iam-wildcards": lambda r: checks.iam_wildcards(r.plan.resources),
    "no-kubernetes-rbac-wildcards": lambda r: checks.k8s_rbac_wildcards(r.plan.resources),
    "secrets-only-in-the-store": lambda r: checks.secrets_outside_the_store(r.plan.resources, r.files, r.plan.outputs),
    "imdsv2-everywhere": lambda r: checks.imds_v1(r.plan.resources),
    "encrypted-at-rest": lambda r: checks.unencrypted(r.plan.resources),
    "nothing-public-by-default": lambda r: checks.public_addresses(r.plan.resources, _spec(r)),
    "least-privilege-pod-identities": lambda r: checks.pod_identity_grants(r.plan.resources, _spec(r)),
    "least-privilege-telemetry": lambda r: checks.telemetry_grants(r.plan.resources),
}


def _spec(result) -> dict:
    return result.spec.model_dump(mode="json")


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_example_stack(stack, check):
    violations = CHECKS[check](stack_result(stack))
    assert not violations, "\n".join(violations)


def _variants(stack: str) -> dict[str, dict]:
    """The stack with every option that opens something or adds a secret turned on."""
    base = stack_spec_data(stack)
    out = {}
    ssh = copy.deepcopy(base)
    ssh.setdefault("network", {})["ssh_ingress_cidrs"] = ["203.0.113.0/24"]
    out["ssh-from-a-cidr"] = ssh
    if base.get("scheduler") == "kubernetes":
        api = copy.deepcopy(base)
        api.setdefault("kubernetes", {})["api_access_cidrs"] = ["203.0.113.0/24"]
        out["public-api-from-a-cidr"] = api
    if base.get("scheduler", "slurm") == "slurm":
        acct = copy.deepcopy(base)
        acct.setdefault("slurm", {})["accounting"] = True
        out["accounting"] = acct
        public = copy.deepcopy(ssh)
        if not (public.get("network") or {}).get("existing"):
            public.setdefault("slurm", {}).setdefault("head_node", {})["public_ip"] = True
            out["public-head"] = public
    return out


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_stack_with_its_options_opened_up(stack, check):
    for variant, spec in _variants(stack).items():
        violations = CHECKS[check](result_with_spec(stack, spec))
        assert not violations, f"{variant}:\n" + "\n".join(violations)


def test_world_ssh_only_when_asked_and_only_port_22(plan_spec, base_spec):
    """0.0.0.0/0 in ssh_ingress_cidrs is the user's explicit choice (the policy pack's AIC-SEC-004
    still fails it as critical); it opens tcp/22 on the head and nothing else."""
    base_spec["network"] = {"ssh_ingress_cidrs": ["0.0.0.0/0"]}
    plan = plan_spec(base_spec)
    assert checks.world_ingress(plan.resources, base_spec) == []
    assert checks.world_ingress(plan.resources, {}) != []      # not asked: a violation
    from aicluster.commands.check import verdicts_for_plan
    sec004 = next(v for v in verdicts_for_plan(plan) if v.rule_id == "AIC-SEC-004")
    assert sec004.status == "fail"


# --- each check fails on its mistake ------------------------------------------------------------


def r(type_, name="bad", inputs=None, outputs=None, **kw):
    return CapturedResource(urn=f"urn:pulumi:s::p::{type_}::{name}", type=type_, name=name, parent_urn=None,
                            custom=True, id=name, inputs=inputs or {}, outputs=outputs or {}, protect=False,
                            retain_on_delete=False, provider=None, dependencies=(), **kw)


def test_world_ingress_is_caught():
    sg = r("aws:ec2/securityGroup:SecurityGroup", inputs={"ingress": [
        {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["0.0.0.0/0"]}]})
    rule = r("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
             inputs={"ipProtocol": "-1", "cidrIpv6": "::/0"})
    ssh = r("aws:ec2/securityGroup:SecurityGroup", inputs={"ingress": [
        {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]})
    eks = r("aws:eks/cluster:Cluster", inputs={"vpcConfig": {"endpointPublicAccess": True}})
    fw = r("gcp:compute/firewall:Firewall", inputs={"allows": [{"protocol": "tcp", "ports": ["22"]}],
                                                    "sourceRanges": ["0.0.0.0/0"]})
    assert len(checks.world_ingress([sg, rule, ssh, eks, fw], {})) == 5
    asked = {"network": {"ssh_ingress_cidrs": ["0.0.0.0/0"]}}
    assert len(checks.world_ingress([ssh, fw], asked)) == 0
    assert len(checks.world_ingress([sg], asked)) == 1          # asking for SSH opens only 22


def test_iam_wildcards_are_caught():
    doc = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"},
                         {"Effect": "Allow", "Action": ["ec2:*"], "Resource": ["*"]},
                         {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
                         {"Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
                         {"Effect": "Deny", "Action": "*", "Resource": "*"}]}
    policy = r("aws:iam/rolePolicy:RolePolicy", inputs={"policy": json.dumps(doc)})
    admin = r("aws:iam/rolePolicyAttachment:RolePolicyAttachment",
              inputs={"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"})
    owner = r("gcp:projects/iAMMember:IAMMember", inputs={"role": "roles/owner"})
    assert len(checks.iam_wildcards([policy, admin, owner])) == 5


def test_kubernetes_rbac_wildcards_are_caught():
    role = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
    wild = r(role, name="wild", inputs={"rules": [{"apiGroups": ["*"], "resources": ["nodes"], "verbs": ["get"]},
                                                  {"apiGroups": [""], "resources": ["*"], "verbs": ["*"]},
                                                  {"nonResourceURLs": ["/metrics*"], "verbs": ["get"]}]})
    escalate = r(role, name="escalate", inputs={"rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                                                           "resources": ["clusterroles"], "verbs": ["bind"]}]})
    admin = r("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", name="admin",
              inputs={"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}})
    narrow = r(role, name="narrow", inputs={"rules": [{"apiGroups": [""], "resources": ["nodes"],
                                                       "verbs": ["get", "list", "patch"]}]})
    assert len(checks.k8s_rbac_wildcards([wild, escalate, admin, narrow])) == 6


def test_secrets_outside_the_store_are_caught():
    key = "c2VjcmV0LWtleS1tYXRlcmlhbC0xMjM0NTY3ODkw"
    generator = r("random:index/randomBytes:RandomBytes", outputs={"base64": Secret(key)})
    stored = r("aws:secretsmanager/secretVersion:SecretVersion", inputs={"secretString": Secret(key)})
    assert checks.secrets_outside_the_store([generator, stored], {}, {}) == []
    leak = r("aws:ec2/instance:Instance", inputs={"userData": f"echo {key} > /etc/munge/munge.key"})
    plain = r("aws:secretsmanager/secretVersion:SecretVersion", name="plain", inputs={"secretString": key})
    pem = r("aws:ssm/parameter:Parameter", name="pem", inputs={"value": "-----BEGIN RSA PRIVATE KEY-----\nMII"})
    found = checks.secrets_outside_the_store([generator, stored, leak, plain, pem],
                                             {"user-data/x.yaml": f"key: {key}"}, {"munge": Secret(key)})
    assert len(found) == 5, found


def test_imds_v1_is_caught():
    lt = r("aws:ec2/launchTemplate:LaunchTemplate", inputs={"metadataOptions": {"httpTokens": "optional"}})
    bare = r("aws:ec2/instance:Instance", inputs={})
    hops = r("aws:ec2/launchTemplate:LaunchTemplate", name="hops",
             inputs={"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 5}})
    legacy = r("gcp:compute/instance:Instance", inputs={"metadata": {"disable-legacy-endpoints": "false"}})
    assert len(checks.imds_v1([lt, bare, hops, legacy])) == 4


def test_unencrypted_storage_is_caught():
    lt = r("aws:ec2/launchTemplate:LaunchTemplate", inputs={"blockDeviceMappings": [
        {"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]})
    instance = r("aws:ec2/instance:Instance", inputs={"rootBlockDevice": {"volumeSize": 100}})
    volume = r("aws:ebs/volume:Volume", inputs={"size": 10})
    bucket = r("aws:s3/bucket:Bucket", inputs={"bucket": "b"})
    obj = r("aws:s3/bucketObjectv2:BucketObjectv2", inputs={"bucket": "b", "key": "k"})
    db = r("aws:rds/instance:Instance", inputs={})
    unknown = r("aws:fsx/windowsFileSystem:WindowsFileSystem", inputs={})   # not in the stateful table
    mystery = r("gcp:compute/disk:Disk", inputs={})                          # service-encrypted: fine
    topic = r("aws:sns/topic:Topic", inputs={"name": "alerts"})
    keyed = r("aws:sns/topic:Topic", name="keyed", inputs={"name": "alerts", "kmsMasterKeyId": "arn:aws:kms:k"})
    assert len(checks.unencrypted([lt, instance, volume, bucket, obj, db, unknown, mystery, topic, keyed])) == 7


def test_telemetry_grants_beyond_the_cluster_are_caught():
    ws_arn = "arn:aws:aps:us-east-1:123456789012:workspace/ws-1"
    group_arn = "arn:aws:logs:us-east-1:123456789012:log-group:/aicluster/demo/slurmd"
    ws = r("aws:amp/workspace:Workspace", name="ws", outputs={"arn": ws_arn})
    group = r("aws:cloudwatch/logGroup:LogGroup", name="group", outputs={"arn": group_arn})

    def policy(name, *statements):
        return r("aws:iam/rolePolicy:RolePolicy", name=name, inputs={"policy": json.dumps(
            {"Version": "2012-10-17", "Statement": list(statements)})})

    exact = policy("exact", {"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": [ws_arn]},
                   {"Effect": "Allow", "Action": ["logs:PutLogEvents"], "Resource": [group_arn, f"{group_arn}:log-stream:*"]})
    assert checks.telemetry_grants([ws, group, exact]) == []
    any_workspace = policy("any-ws", {"Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": "*"})
    other_group = policy("other", {"Effect": "Allow", "Action": ["logs:PutLogEvents"],
                                   "Resource": ["arn:aws:logs:us-east-1:123456789012:log-group:/other:*"]})
    wild_action = policy("wild", {"Effect": "Allow", "Action": ["aps:*"], "Resource": [ws_arn]})
    admin = r("gcp:projects/iAMMember:IAMMember", name="admin", inputs={"role": "roles/monitoring.admin"})
    writer = r("gcp:projects/iAMMember:IAMMember", name="writer", inputs={"role": "roles/logging.logWriter"})
    found = checks.telemetry_grants([ws, group, any_workspace, other_group, wild_action, admin, writer])
    assert [f.split(":")[0] for f in found] == ["any-ws", "other", "wild", "admin"], found


def test_public_addresses_are_caught():
    lt = r("aws:ec2/launchTemplate:LaunchTemplate", inputs={"networkInterfaces": [{"associatePublicIpAddress": "true"}]})
    head = r("aws:ec2/instance:Instance", inputs={"associatePublicIpAddress": True,
                                                  "tags": {"aicluster-role": "head"}})
    assert len(checks.public_addresses([lt, head], {})) == 2
    asked = {"slurm": {"head_node": {"public_ip": True}}}
    assert len(checks.public_addresses([head], asked)) == 0
