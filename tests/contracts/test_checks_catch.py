"""Each contract check fails on the mistake it exists for (and the breach names the URN, the input
path, the value and the source), so a passing test_limits.py means something."""
from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest
import yaml

from tests.support import cloud_limits as cl
from aicluster.gcp.common import label_key
from aicluster.offline.capture import CapturedResource, Plan
from aicluster.spec.cluster import _gcp_label_key


def res(type_: str, logical: str = "bad", provider: str | None = None, **inputs) -> CapturedResource:
    return CapturedResource(urn=f"urn:pulumi:s::p::{type_}::{logical}", type=type_, name=logical, parent_urn=None,
                            custom=True, id=logical, inputs=inputs, outputs={}, protect=False, retain_on_delete=False,
                            provider=provider, dependencies=())


def result(*resources, files=None, config=None, pools=(), scheduler="kubernetes"):
    design = SimpleNamespace(scheduler=scheduler,
                             pools=[SimpleNamespace(name=n, max_nodes=m) for n, m in pools])
    return SimpleNamespace(plan=Plan("p", "s", list(resources), {}), files=files or {},
                           design=design, stack=SimpleNamespace(config=config or {}))


def limits_hit(check, *resources, **kw) -> set[str]:
    breaches = check("v", result(*resources, **kw))
    for b in breaches:    # every breach says where, what and why
        text = str(b)
        assert b.urn in text and b.path in text and "source: " in text and b.limit in text
    return {b.limit for b in breaches}


LT = "aws:ec2/launchTemplate:LaunchTemplate"


def test_user_data_over_16_kib_raw_is_caught_in_templates_and_instances():
    big = "#cloud-config\n" + "x" * 16_400
    ok = "#cloud-config\n" + "x" * 16_000
    assert limits_hit(cl.user_data, res(LT, userData=base64.b64encode(big.encode()).decode())) == \
        {"ec2_user_data_bytes"}
    assert limits_hit(cl.user_data, res("aws:ec2/instance:Instance", userData=big)) == {"ec2_user_data_bytes"}
    # 16,000 raw bytes are 21,336 in base64: the limit is on the raw text.
    assert not limits_hit(cl.user_data, res(LT, userData=base64.b64encode(ok.encode()).decode()))


def test_gce_metadata_value_total_and_key_are_caught():
    big = "x" * 262_145
    hit = limits_hit(cl.gce_metadata,
                     res("gcp:compute/instanceTemplate:InstanceTemplate", metadata={"user-data": big}),
                     res("gcp:tpu/v2Vm:V2Vm", metadata={f"k{i}": "x" * 200_000 for i in range(3)}),
                     res("gcp:container/nodePool:NodePool", nodeConfig={"metadata": {"bad key!": "v"}}))
    assert hit == {"gce_metadata_value_bytes", "gce_metadata_total_bytes", "gce_metadata_key"}


def test_aws_tag_count_lengths_characters_and_defaults_are_caught():
    many = {f"k{i}": "v" for i in range(45)}
    tagged = res("pulumi:providers:aws", "tagged", defaultTags={"tags": {f"d{i}": "v" for i in range(10)}})
    provider = f"{tagged.urn}::{tagged.id}"          # how a resource names its provider
    hit = limits_hit(cl.aws_tags,
                     tagged, res("aws:s3/bucket:Bucket", provider=provider, tags=many),     # 55 with tags_all
                     res("aws:iam/role:Role", tags={"team": "{{ cluster }}"}),             # IAM alphabet
                     res("aws:ec2/vpc:Vpc", tags={"k" * 128: "v" * 257, "aws:x": "y"}))
    assert hit == {"aws_tags_per_resource", "aws_tag_chars", "aws_tag_key_length", "aws_tag_value_length",
                   "aws_reserved_tag_prefix"}
    # EC2 takes any characters, except in instance tag keys readable through instance metadata.
    assert not limits_hit(cl.aws_tags, res("aws:ec2/vpc:Vpc", tags={"team": "{{ cluster }}"}))
    lt = res(LT, metadataOptions={"instanceMetadataTags": "enabled"},
             tagSpecifications=[{"resourceType": "instance", "tags": {"cost center": "1"}}])
    assert limits_hit(cl.aws_tags, lt) == {"ec2_metadata_tag_key"}


def test_boot_tags_of_the_resume_program_count_against_the_instance():
    tags = {f"k{i}": "v" for i in range(48)}
    lt = res(LT, tagSpecifications=[{"resourceType": "instance", "tags": tags}])
    files = {"aicluster/cluster.json": json.dumps({"cluster_tag": "c", "pool_tag": "p", "node_tag": "n"})}
    assert limits_hit(cl.aws_tags, lt, files=files) == {"aws_tags_per_resource"}
    assert not limits_hit(cl.aws_tags, lt)


def test_gcp_labels_are_caught_but_gke_node_labels_are_kubernetes_labels():
    hit = limits_hit(cl.gcp_labels,
                     res("gcp:compute/network:Network", labels={f"k{i}": "v" for i in range(65)}),
                     res("gcp:storage/bucket:Bucket", labels={"Team": "ML.Platform", "1x": ""}))
    assert hit == {"gcp_labels_per_resource", "gcp_label_key", "gcp_label_value"}
    pool = res("gcp:container/nodePool:NodePool", nodeConfig={"labels": {"aicluster.io/pool": "gpu"},
                                                              "resourceLabels": {"ok": "yes"}})
    assert not limits_hit(cl.gcp_labels, pool)


def test_gce_network_tags_are_caught():
    hit = limits_hit(cl.gce_network_tags, res("gcp:compute/instance:Instance", tags=["Head_Node"]),
                     res("gcp:container/nodePool:NodePool", nodeConfig={"tags": [f"t{i}" for i in range(65)]}))
    assert hit == {"gce_network_tags"}


def test_iam_sizes_counts_and_names_are_caught():
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::" + "b" * 4000}
    policy = json.dumps({"Version": "2012-10-17", "Statement": [statement]}, indent=4)
    role = res("aws:iam/role:Role", "r" * 60)                       # autoname: 60 + 8 > 64
    inline = [res("aws:iam/rolePolicy:RolePolicy", f"p{i}", role="r", policy=policy) for i in range(3)]
    attach = [res("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"a{i}", role="r", policyArn=f"arn:{i}")
              for i in range(11)]
    managed = res("aws:iam/policy:Policy", "m", policy=json.dumps({"Statement": [statement, statement]}))
    trust = res("aws:iam/role:Role", "t", name="t", assumeRolePolicy=json.dumps({"x": "y" * 2100}))
    doc = res("aws:iam/rolePolicy:RolePolicy", "d", role="t", policy='{"Sid": "\u2603"}')
    hit = limits_hit(cl.aws_iam, role, *inline, *attach, managed, trust, doc)
    assert hit == {"iam_role_name", "iam_role_inline_policy_chars", "iam_managed_policies_per_role",
                   "iam_managed_policy_chars", "iam_trust_policy_chars", "iam_policy_document_chars"}
    # 3 x ~4,080 characters once whitespace is left out: over 10,240 together, not one by one.
    assert not limits_hit(cl.aws_iam, res("aws:iam/rolePolicy:RolePolicy", "p", role="r", policy=policy))


def test_gcp_custom_role_and_service_account_are_caught():
    hit = limits_hit(cl.gcp_iam,
                     res("gcp:projects/iAMCustomRole:IAMCustomRole", roleId="aicluster-dns",
                         permissions=[f"p.{i}" for i in range(3001)], title="t" * 101),
                     res("gcp:serviceaccount/account:Account", accountId="x" * 31))
    assert hit == {"gcp_custom_role_permissions", "gcp_custom_role_id", "gcp_custom_role_title",
                   "gcp_service_account_id"}


def test_aws_names_are_caught():
    hit = limits_hit(cl.aws_names,
                     res("aws:s3/bucket:Bucket", "b", bucket="Bad_Bucket"),
                     res("aws:s3/bucket:Bucket", "p", bucketPrefix="x" * 38),
                     res("aws:s3/bucketObjectv2:BucketObjectv2", key="k" * 1025),
                     res("aws:secretsmanager/secret:Secret", name="aicluster/c/munge-abcdef"),
                     res("aws:route53/zone:Zone", name="a" * 64 + ".internal"),
                     res("aws:ec2/securityGroup:SecurityGroup", "sg-x", description="the spec's CIDRs"),
                     res("aws:eks/cluster:Cluster", name="c" * 101),
                     res("aws:eks/nodeGroup:NodeGroup", nodeGroupName="n" * 64),
                     res("aws:cloudwatch/logGroup:LogGroup", name="/aws/eks/c cluster"),
                     res("aws:ec2/launchTemplate:LaunchTemplate", "t" * 121),
                     res("aws:ec2/vpc:Vpc", cidrBlock="10.0.0.0/8"),
                     res("aws:sns/topic:Topic", name="aicluster.c.alerts"),
                     res("aws:amp/ruleGroupNamespace:RuleGroupNamespace", name="-" + "r" * 64))
    assert hit == {"s3_bucket_name", "s3_bucket_prefix", "s3_object_key_bytes", "secretsmanager_name",
                   "route53_name", "ec2_security_group_name", "ec2_security_group_text_chars", "eks_cluster_name",
                   "eks_nodegroup_name", "cloudwatch_log_group_name", "ec2_launch_template_name", "vpc_cidr_prefix",
                   "sns_topic_name", "amp_rule_groups_namespace_name"}


def test_accounting_database_names_are_caught():
    """RDS's identifier, final snapshot and parameter group; Cloud SQL's instance ID."""
    assert limits_hit(cl.aws_names,
                      res("aws:rds/instance:Instance", identifier="c--slurmdbd", finalSnapshotIdentifier="1-final"),
                      res("aws:rds/parameterGroup:ParameterGroup", name="c-slurmdbd-")) == {
        "rds_db_identifier", "rds_group_name"}
    assert limits_hit(cl.aws_names, res("aws:rds/instance:Instance", identifier="d" * 64,
                                        finalSnapshotIdentifier="ok-final")) == {"rds_db_identifier"}
    assert limits_hit(cl.gcp_names, res("gcp:sql/databaseInstance:DatabaseInstance", name="C-slurmdbd")) == {
        "cloudsql_instance_id"}


def test_slurm_node_names_at_boot_are_caught():
    zone = res("aws:route53/zone:Zone", name="c.aicluster.internal")
    assert limits_hit(cl.aws_names, zone, pools=[("p" * 60, 1000)], scheduler="slurm") == {"route53_name"}
    files = {"aicluster/cluster.json": json.dumps({"instance_prefix": "c" * 30 + "-"})}
    assert limits_hit(cl.gcp_names, pools=[("p" * 30, 100)], scheduler="slurm", files=files) == {"gcp_resource_name"}


def test_gcp_names_are_caught():
    hit = limits_hit(cl.gcp_names,
                     res("gcp:compute/network:Network", "n", name="Net_1"),
                     res("gcp:compute/firewall:Firewall", "f" * 60),                 # autoname 68
                     res("gcp:compute/instanceTemplate:InstanceTemplate", namePrefix="p" * 40),
                     res("gcp:container/cluster:Cluster", name="c" * 41),
                     res("gcp:lustre/instance:Instance", instanceId="lustre", filesystem="scratch01"),
                     res("gcp:filestore/instance:Instance", name="fs", fileShares={"name": "Home-Share"}),
                     res("gcp:storage/bucket:Bucket", name="google-data"),
                     res("gcp:storage/bucketObject:BucketObject", name="a\nb"),
                     res("gcp:secretmanager/secret:Secret", secretId="a/b"),
                     res("gcp:dns/managedZone:ManagedZone", name="z", dnsName="x" * 64 + ".internal."),
                     res("gcp:tpu/v2Vm:V2Vm", name="1tpu"))
    assert hit == {"gcp_resource_name", "gce_instance_template_name_prefix", "gke_cluster_name",
                   "managed_lustre_filesystem", "filestore_share_name", "gcs_bucket_name", "gcs_object_name_bytes",
                   "gcp_secret_id", "cloud_dns_name", "tpu_node_id"}


def _nic(card, device, kind="efa-only"):
    return {"networkCardIndex": card, "deviceIndex": device, "interfaceType": kind}


def test_ec2_interfaces_per_card_and_efa_are_caught():
    # p5.48xlarge: 2 interfaces per card, 32 cards, 32 EFA devices.
    crowded = res(LT, instanceType="p5.48xlarge",
                  networkInterfaces=[_nic(0, 0, "interface"), _nic(0, 1), _nic(0, 2, "interface")])
    two_efa = res(LT, instanceType="p4d.24xlarge", networkInterfaces=[_nic(0, 0, "interface"), _nic(1, 0), _nic(1, 1)])
    efa_primary = res(LT, instanceType="p4d.24xlarge", networkInterfaces=[_nic(0, 0)])
    too_many = res(LT, instanceType="p4d.24xlarge",
                   networkInterfaces=[_nic(0, 0, "interface")] + [_nic(c, 1) for c in range(5)])
    assert limits_hit(cl.ec2_interfaces, crowded) == {"ec2_interfaces_per_card"}
    assert limits_hit(cl.ec2_interfaces, two_efa) == {"ec2_efa_per_card"}
    assert limits_hit(cl.ec2_interfaces, efa_primary) == {"ec2_efa_per_card"}
    assert limits_hit(cl.ec2_interfaces, too_many) == {"ec2_efa_per_card", "ec2_interfaces_per_card"}


def test_gce_interfaces_per_machine_type_are_caught():
    assert cl.gce_max_nics("a3-megagpu-8g") == 9 and cl.gce_max_nics("a3-ultragpu-8g") == 10
    assert cl.gce_max_nics("n2-standard-4") == 4 and cl.gce_max_nics("n2-standard-64") == 8
    nine = [{"network": f"n{i}"} for i in range(9)]
    hit = limits_hit(cl.gce_interfaces,
                     res("gcp:compute/instanceTemplate:InstanceTemplate", machineType="a3-highgpu-8g",
                         networkInterfaces=nine),
                     res("gcp:container/nodePool:NodePool", nodeConfig={"machineType": "n2-standard-4"},
                         networkConfig={"additionalNodeNetworkConfigs": nine[:4]}))
    assert hit == {"gce_nics"}
    assert not limits_hit(cl.gce_interfaces, res("gcp:compute/instanceTemplate:InstanceTemplate",
                                                 machineType="a3-megagpu-8g", networkInterfaces=nine))


def test_kubernetes_names_labels_and_taints_are_caught():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j" * 64, "namespace": "Training",
                                                                  "labels": {"app": "-bad"}},
           "spec": {"template": {"spec": {"nodeSelector": {"a/b/c": "x"},
                                          "containers": [{"name": "Main", "ports": [{"name": "x" * 16}]}]}}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}, "data": {"a b": "x"}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "s" * 40},
              "spec": {"replicatedJobs": [{"name": "w" * 30, "replicas": 2}]}}
    files = {"k8s/training/job.yaml": yaml.safe_dump_all([job, cm, jobset])}
    group = res("aws:eks/nodeGroup:NodeGroup", labels={"x" * 64: "v"}, taints=[{"key": "k", "value": "v" * 64}])
    helm = res("kubernetes:helm.sh/v3:Release", name="r" * 54)
    hit = limits_hit(cl.k8s_objects, group, helm, files=files)
    assert hit == {"k8s_dns_label", "k8s_label_key", "k8s_label_value", "k8s_port_name", "k8s_configmap_key",
                   "helm_release_name"}


@pytest.mark.parametrize("key", ["Team", "cost center", "ML.Platform", "1st", "-x", "ünï", "a" * 70, "x_y-z"])
def test_the_spec_turns_tag_keys_into_the_labels_gcp_components_write(key):
    assert _gcp_label_key(key) == label_key(key)


def test_an_instance_takes_its_launch_templates_metadata_options():
    lt = res(LT, "lt-head", metadataOptions={"instanceMetadataTags": "enabled"})
    head = res("aws:ec2/instance:Instance", launchTemplate={"id": "lt-head"}, tags={"cost center": "1"})
    assert limits_hit(cl.aws_tags, lt, head) == {"ec2_metadata_tag_key"}


def test_secret_sizes_role_descriptions_subnets_and_configmaps_are_caught():
    assert limits_hit(cl.secret_values, res("aws:secretsmanager/secretVersion:SecretVersion", secretString="k" * 65537),
                      res("gcp:secretmanager/secretVersion:SecretVersion", secretData="k" * 65537)) == \
        {"secretsmanager_secret_bytes", "gcp_secret_payload_bytes"}
    assert limits_hit(cl.aws_iam, res("aws:iam/role:Role", "r", description="nodes \u2192 head")) == {"iam_role_description"}
    assert limits_hit(cl.gcp_names, res("gcp:compute/subnetwork:Subnetwork", "s", name="s",
                                        ipCidrRange="10.0.0.0/30")) == {"gcp_subnet_prefix"}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "x" * ((1 << 20) + 1)}}
    assert limits_hit(cl.k8s_objects, files={"k8s/x/cm.yaml": yaml.safe_dump(cm)}) == {"k8s_configmap_bytes"}


def test_budget_names_notifications_and_channels_are_caught():
    note = {"notificationType": "ACTUAL", "threshold": 50, "subscriberSnsTopicArns": ["arn:a", "arn:b"]}
    hit = limits_hit(cl.budgets,
                     res("aws:budgets/budget:Budget", name="team:budget", notifications=[note] + [{}] * 10),
                     res("aws:budgets/budget:Budget", "ok", name="aicluster-x-monthly", notifications=[{}] * 10),
                     res("gcp:billing/budget:Budget", displayName="x" * 61,
                         allUpdatesRule={"monitoringNotificationChannels": ["c"] * 6}))
    assert hit == {"aws_budget_name", "aws_budget_notifications", "gcp_budget_display_name", "gcp_budget_channels"}
    assert limits_hit(cl.budgets, res("aws:budgets/budget:Budget", name="a/action/b")) == {"aws_budget_name"}
    assert not limits_hit(cl.budgets, res("gcp:billing/budget:Budget", displayName="aicluster x monthly"))
    assert limits_hit(cl.budgets, res("gcp:billing/budget:Budget", displayName="x", allUpdatesRule={"schemaVersion": "1.0"})) \
        == {"gcp_budget_notification_rule"}
