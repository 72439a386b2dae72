"""The deployer's permissions (catalog/deployer_permissions.yaml, design/deployer_permissions.py):
the table is sourced and names real AWS actions (botocore's operation list, tests/data/aws-operations/),
the derivation merges a plan's needs into scoped, region-bound policy documents, and a type the
table does not know is named. The completeness over every stack and variant and the IAM size
limits are contracts: tests/contracts/test_deployer_policy.py."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from aicluster.catalog import CatalogError
from aicluster.catalog.deployer_permissions import _FILE, load_deployer_table, parse_table
from aicluster.design.deployer_permissions import derive, policy_chars
from tests.support import aws_operations

TABLE = load_deployer_table()


def _doc() -> dict:
    return yaml.safe_load(_FILE.read_text())


def _all_actions() -> dict[str, list[str]]:
    """action -> where the table names it."""
    found: dict[str, list[str]] = {}
    needs = {**{f"provider {k}": n for k, n in TABLE.aws_provider.items()}, **TABLE.aws_types}
    for where, need in needs.items():
        for action in need.all_actions():
            found.setdefault(action, []).append(where)
    for platform, access in TABLE.kubernetes_access.items():
        for action in access.actions:
            found.setdefault(action, []).append(f"kubernetes.access.{platform}")
    for action in ("iam:PassRole", "iam:CreateServiceLinkedRole"):   # the derivation's own statements
        found.setdefault(action, []).append("derivation")
    return found


# ---------------------------------------------------------------- the table


def test_every_aws_action_is_an_api_operation_or_says_what_it_authorizes():
    ops = aws_operations.vendored()["services"]
    wrong = []
    for action, where in sorted(_all_actions().items()):
        prefix, name = action.split(":")
        assert prefix in ops, f"{action}: service {prefix} is not in {aws_operations.FILE.name}; regenerate it"
        if name not in ops[prefix]["operations"] and action not in TABLE.permission_only:
            wrong.append(f"{action} (in {', '.join(where)})")
    assert not wrong, "not an API operation of its service, and not in permission_only:\n" + "\n".join(wrong)


def test_permission_only_actions_are_no_api_name_and_are_used():
    ops = aws_operations.vendored()["services"]
    used = _all_actions()
    for action, authorizes in TABLE.permission_only.items():
        prefix, name = action.split(":")
        assert name not in ops[prefix]["operations"], f"{action} is an API operation: drop it from permission_only"
        assert action in used, f"{action} is in permission_only but no entry needs it"
        assert authorizes.strip(), action


def test_vendored_operations_match_the_locked_botocore():
    botocore = pytest.importorskip("botocore")
    data = aws_operations.vendored()
    if data["botocore"] != botocore.__version__:
        pytest.skip(f"installed botocore {botocore.__version__}, the list is from {data['botocore']}")
    assert aws_operations.from_botocore(data["services"])["services"] == data["services"]
    assert set(data["services"]) == set(TABLE.aws_services), "regenerate: python -m tests.support.aws_operations"


def test_every_entry_has_a_source_and_the_table_a_checked_date():
    assert TABLE.checked >= "2026-01-01"
    for key, need in {**TABLE.aws_types, **TABLE.gcp_types, **TABLE.aws_provider, **TABLE.gcp_provider}.items():
        assert "https://" in need.source, key
    for prefix, (url, _) in TABLE.aws_services.items():
        assert url.startswith("https://docs.aws.amazon.com/service-authorization/latest/reference/list_"), prefix


@pytest.mark.parametrize("path", [("aws", "types", "aws:fsx/lustreFileSystem:LustreFileSystem"),
                                  ("gcp", "types", "gcp:lustre/instance:Instance"),
                                  ("kubernetes", "access", "eks")])
def test_the_loader_refuses_an_entry_without_a_source(path):
    doc = _doc()
    entry = doc
    for key in path:
        entry = entry[key]
    del entry["source"]
    with pytest.raises(CatalogError, match="source"):
        parse_table(doc)


def test_the_loader_refuses_a_wildcard_action_and_an_unknown_service():
    doc = _doc()
    doc["aws"]["types"]["aws:ec2/vpc:Vpc"]["actions"].append("ec2:Describe*")
    with pytest.raises(CatalogError, match="wildcards"):
        parse_table(doc)
    doc = _doc()
    doc["aws"]["types"]["aws:ec2/vpc:Vpc"]["actions"].append("lambda:CreateFunction")
    with pytest.raises(CatalogError, match="lambda"):
        parse_table(doc)


def test_gcp_entries_name_predefined_roles():
    for key, need in TABLE.gcp_types.items():
        assert need.roles and all(r.startswith("roles/") for r in need.roles), key
    doc = _doc()
    doc["gcp"]["types"]["gcp:tpu/v2Vm:V2Vm"]["roles"] = ["tpu.admin"]
    with pytest.raises(CatalogError, match="roles/"):
        parse_table(doc)


# ---------------------------------------------------------------- the derivation

AWS_TYPES = ("aws:ec2/instance:Instance", "aws:iam/role:Role", "aws:iam/instanceProfile:InstanceProfile",
             "aws:fsx/lustreFileSystem:LustreFileSystem", "aws:eks/cluster:Cluster", "aws:route53/zone:Zone",
             "kubernetes:core/v1:Namespace", "random:index/randomPassword:RandomPassword")


def _statement(perms, sid_or_action: str) -> dict:
    found = [s for d in perms.documents for s in d["Statement"]
             if s["Sid"] == sid_or_action or sid_or_action in s["Action"]]
    assert found, f"no statement {sid_or_action}"
    return found[0]


def test_aws_policy_passes_only_the_clusters_roles_to_the_services_that_take_them():
    perms = derive("aws", "demo", "eu-west-1", AWS_TYPES, role_names=("demo-head-role", "demo-head-profile"))
    passrole = _statement(perms, "iam:PassRole")
    assert passrole["Resource"] == "arn:aws:iam::*:role/demo-*"
    assert passrole["Condition"]["StringEquals"]["iam:PassedToService"] == ["ec2.amazonaws.com", "eks.amazonaws.com"]
    linked = _statement(perms, "iam:CreateServiceLinkedRole")
    assert linked["Condition"]["StringEquals"]["iam:AWSServiceName"] == ["eks.amazonaws.com", "fsx.amazonaws.com"]
    assert _statement(perms, "iam:CreateRole")["Resource"] == "arn:aws:iam::*:role/demo-*"
    assert _statement(perms, "iam:CreateInstanceProfile")["Resource"] == "arn:aws:iam::*:instance-profile/demo-*"
    assert _statement(perms, "ssm:GetParameters")["Resource"] == "arn:aws:ssm:eu-west-1::parameter/aws/service/*"
    assert not perms.missing and not perms.problems()
    assert "eks:DescribeCluster" in perms.actions and perms.kubernetes


def test_managed_policies_attach_only_those_the_plan_attaches():
    types = ("aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
             "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    ssm = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
    perms = derive("aws", "demo", "eu-west-1", types, role_names=("demo-r",), policy_arns=[ssm])
    attach = [s for d in perms.documents for s in d["Statement"] if "iam:AttachRolePolicy" in s["Action"]]
    ours = next(s for s in attach if s["Resource"] == "arn:aws:iam::*:role/demo-*")
    assert ours["Condition"] == {"ArnEquals": {"iam:PolicyARN": [ssm]}}
    assert set(ours["Action"]) == {"iam:AttachRolePolicy", "iam:DetachRolePolicy"}
    fsx = next(s for s in attach if "aws-service-role" in s["Resource"])     # FSx's own role: not the plan's ARNs
    assert "Condition" not in fsx
    unknown = derive("aws", "demo", "eu-west-1", types, role_names=("demo-r",), policy_arns=None)
    assert all("Condition" not in s for d in unknown.documents for s in d["Statement"]
               if "iam:AttachRolePolicy" in s["Action"])


def test_regional_services_are_bound_to_the_region_global_ones_are_not():
    perms = derive("aws", "demo", "eu-west-1", AWS_TYPES, role_names=("demo-r",))
    for statement in (s for d in perms.documents for s in d["Statement"]):
        service = statement["Action"][0].split(":")[0]
        region = statement.get("Condition", {}).get("StringEquals", {}).get("aws:RequestedRegion")
        if service in ("iam", "route53", "sts"):
            assert region is None, statement["Sid"]
        else:
            assert region == ["eu-west-1"], statement["Sid"]


def test_roles_lose_the_prefix_when_a_planned_role_name_lacks_it():
    perms = derive("aws", "demo", "eu-west-1", AWS_TYPES, role_names=("demo-head-role", "shared-role"))
    assert _statement(perms, "iam:PassRole")["Resource"] == "arn:aws:iam::*:role/*"
    assert any("every role" in w for w in perms.wildcards)


def test_only_what_the_plan_creates_is_allowed():
    small = derive("aws", "demo", "eu-west-1", ("aws:ec2/vpc:Vpc",))
    assert "fsx:CreateFileSystem" not in small.actions and "iam:PassRole" not in small.actions
    assert {"ec2:CreateVpc", "sts:GetCallerIdentity", "ssm:GetParameters"} <= set(small.actions)
    assert not small.kubernetes


def test_a_type_the_table_does_not_know_is_named():
    perms = derive("aws", "demo", "eu-west-1", ("aws:ec2/vpc:Vpc", "aws:lambda/function:Function"))
    assert perms.missing == ("aws:lambda/function:Function",)
    assert any("aws:lambda/function:Function" in p for p in perms.problems())
    assert derive("gcp", "demo", "europe-west4", ("gcp:foo/bar:Bar",)).missing == ("gcp:foo/bar:Bar",)


def test_a_statement_too_large_for_one_policy_is_split_and_every_document_fits():
    doc = _doc()
    many = sorted(aws_operations.vendored()["services"]["ec2"]["operations"])[:600]
    doc["aws"]["types"]["aws:ec2/vpc:Vpc"]["actions"] = [f"ec2:{op}" for op in many]
    perms = derive("aws", "demo", "eu-west-1", ("aws:ec2/vpc:Vpc",), table=parse_table(doc))
    assert len(perms.documents) > 2
    assert all(policy_chars(d) <= perms.limit_chars for d in perms.documents)
    granted = {a for d in perms.documents for s in d["Statement"] for a in s["Action"]}
    assert {f"ec2:{op}" for op in many} <= granted
    sids = [s["Sid"] for d in perms.documents for s in d["Statement"]]
    assert len(sids) == len(set(sids)) and all(sid.isalnum() for sid in sids)


def test_policy_chars_counts_like_iam_without_white_space():
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}]}
    compact = json.dumps(document, separators=(",", ":"))
    assert policy_chars(document) == len(compact)
    spaced = copy.deepcopy(document)
    spaced["Statement"][0]["Sid"] = "A B"
    assert policy_chars(spaced) == len(json.dumps(spaced, separators=(",", ":"))) - 1


def test_gcp_roles_follow_the_types_and_the_cluster_access():
    perms = derive("gcp", "demo", "europe-west4", ("gcp:container/cluster:Cluster", "gcp:tpu/v2Vm:V2Vm",
                                                   "kubernetes:core/v1:Namespace"))
    assert {"roles/container.admin", "roles/tpu.admin", "roles/iam.serviceAccountUser",
            "roles/serviceusage.serviceUsageConsumer"} <= set(perms.roles)
    assert "kubernetes (in-cluster objects)" in perms.roles["roles/container.admin"]
    assert "roles/lustre.admin" not in perms.roles
    assert perms.kubernetes and not perms.problems()


def test_an_efs_filesystem_lets_destroy_take_its_final_backup():
    """aicluster destroy under on_delete: snapshot starts an AWS Backup job for EFS with the
    account's Backup service role (commands/final_backups.py): the deployer may do both, nothing more."""
    perms = derive("aws", "demo", "eu-west-1", ("aws:efs/fileSystem:FileSystem",), role_names=())
    assert {"backup:StartBackupJob", "backup:DescribeBackupJob"} <= set(perms.actions)
    passes = [s for d in perms.documents for s in d["Statement"] if "iam:PassRole" in s["Action"]]
    assert [s["Resource"] for s in passes] == ["arn:aws:iam::*:role/service-role/AWSBackupDefaultServiceRole"]
