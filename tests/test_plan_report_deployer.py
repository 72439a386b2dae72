"""`aicluster plan` shows the deployer's permissions (text, markdown, JSON) and `--out DIR` writes
them: deployer-policy.json (AWS, IAM policy documents) or deployer-roles.json (GCP)."""
from __future__ import annotations

import json

from aicluster.commands.plan_report import deployer_permissions, markdown, text, to_json, write_outputs
from aicluster.design.deployer_permissions import policy_chars
from tests.support.stack_plans import stack_result


def test_text_and_markdown_show_services_actions_documents_and_sizes():
    result = stack_result("aws-p5-slurm")
    perms = deployer_permissions(result)
    lines = text(result)
    start = lines.index(next(line for line in lines if line.startswith("Deployer permissions")))
    section = "\n".join(lines[start:start + 6])
    assert f"{len(perms.actions)} IAM actions in {len(perms.services)} services" in section
    assert "fsx" in section and "rds" in section and "imagebuilder" in section
    assert f"{perms.document_chars[0]:,}" in section and "limit 6,144 each, 10 per role" in section
    assert "IAM roles scoped to p5-train-*" in section
    assert "### Deployer permissions" in markdown(result)


def test_json_carries_the_summary_and_gcp_the_roles():
    aws = to_json(stack_result("aws-p5-eks"))["deployer_permissions"]
    assert aws["file"] == "deployer-policy.json" and aws["missing_types"] == [] and aws["problems"] == []
    assert {"eks", "iam", "ec2", "fsx"} <= set(aws["services"]) and aws["kubernetes"]
    assert all(p["chars"] <= aws["limits"]["managed_policy_chars"] for p in aws["policies"])
    gcp = to_json(stack_result("gcp-a3ultra-gke"))["deployer_permissions"]
    assert gcp["file"] == "deployer-roles.json"
    roles = {r["role"]: r["for"] for r in gcp["roles"]}
    assert "gcp:container/cluster:Cluster" in roles["roles/container.admin"]
    assert "roles/lustre.admin" in roles and "services" not in gcp


def test_out_writes_the_policy_documents_then_the_roles_in_their_place(tmp_path):
    result = stack_result("aws-p5-slurm")
    write_outputs(result, tmp_path)
    documents = json.loads((tmp_path / "deployer-policy.json").read_text())
    assert documents == list(deployer_permissions(result).documents) and len(documents) >= 1
    for doc in documents:
        assert doc["Version"] == "2012-10-17" and policy_chars(doc) <= 6144
        assert all(s["Effect"] == "Allow" and s["Action"] for s in doc["Statement"])
    granted = {a for d in documents for s in d["Statement"] for a in s["Action"]}
    assert {"fsx:CreateFileSystem", "rds:CreateDBInstance", "iam:PassRole", "imagebuilder:CreateImage"} <= granted
    assert not (tmp_path / "deployer-roles.json").exists()
    attach = [s for d in documents for s in d["Statement"] if "iam:AttachRolePolicy" in s["Action"]]
    assert [s["Condition"]["ArnEquals"]["iam:PolicyARN"] for s in attach] == [
        ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
         "arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder"]]

    write_outputs(stack_result("gcp-a3mega-slurm"), tmp_path)     # another plan into the same DIR
    roles = json.loads((tmp_path / "deployer-roles.json").read_text())
    assert "roles/compute.instanceAdmin.v1" in {r["role"] for r in roles["roles"]}
    assert not (tmp_path / "deployer-policy.json").exists()
