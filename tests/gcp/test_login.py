"""aicluster:gcp:LoginNodes under mocks: no external IP, shielded VM, OS Login, SSH from IAP's
range (the network's rule) and the spec's CIDRs only, a service account that reads the munge key
and one object of the bucket; count 0 creates nothing."""
from __future__ import annotations

import copy
import re

import pytest
import yaml

from aicluster.errors import SpecError
from aicluster.offline.capture import reveal
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN, run_spec

INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"


def spec(cidrs=(), **login) -> dict:
    out = copy.deepcopy(GCP_MIN)
    if login:
        out["slurm"] = {"login": login}
    if cidrs:
        out["network"] = {"ssh_ingress_cidrs": list(cidrs)}
    return out


def logins(plan):
    return [r for r in plan.of_type(INSTANCE) if "-login-" in r.name]


@pytest.fixture(scope="module")
def plan():
    return run_spec(spec())


def test_login_node_is_private_shielded_os_login_and_not_protected(plan):
    (node,) = logins(plan)
    i = node.inputs
    name = GCP_MIN["name"]
    assert i["name"] == f"{name}-login-1" and i["machineType"] == "n2-standard-8"
    (nic,) = i["networkInterfaces"]
    assert not nic.get("accessConfigs")                      # no external IP
    assert i["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableVtpm": True,
                                           "enableIntegrityMonitoring": True}
    assert i["metadata"]["enable-oslogin"] == "TRUE" and i["metadata"]["block-project-ssh-keys"] == "TRUE"
    assert i["tags"] == [f"{name}-node", f"{name}-login"]
    assert i["labels"]["aicluster-role"] == "login"
    assert not node.protect and not node.retain_on_delete and not i.get("deletionProtection")
    assert "bootDisk.initializeParams.image" in node.ignore_changes
    assert i["serviceAccount"]["email"] != plan.named(f"{name}-slurm-head", INSTANCE).inputs["serviceAccount"]["email"]


def test_ssh_only_from_iap_and_the_spec_cidrs(plan):
    name = GCP_MIN["name"]
    rules = {r.inputs["name"]: r.inputs for r in plan.of_type(FIREWALL)}
    iap = rules[f"{name}-iap-ssh"]                           # the network's rule covers every node
    assert iap["sourceRanges"] == ["35.235.240.0/20"] and f"{name}-node" in iap["targetTags"]
    assert f"{name}-login-ssh" not in rules                  # none unless the spec names CIDRs
    with_ssh = {r.inputs["name"]: r.inputs for r in run_spec(spec(cidrs=["192.0.2.0/24"])).of_type(FIREWALL)}
    rule = with_ssh[f"{name}-login-ssh"]
    assert rule["sourceRanges"] == ["192.0.2.0/24"] and rule["targetTags"] == [f"{name}-login"]
    assert [a["ports"] for a in rule["allows"]] == [["22"]]


def test_service_account_reads_the_munge_key_and_exactly_the_objects_it_fetches(plan):
    name = GCP_MIN["name"]
    (munge,) = [r for r in plan.of_type(SECRET_IAM) if r.name == f"{name}-login-munge"]
    assert munge.inputs["role"] == "roles/secretmanager.secretAccessor"
    (read,) = [r for r in plan.of_type(BUCKET_IAM) if r.name == f"{name}-login-mount-script"]
    assert read.inputs["role"] == "roles/storage.objectViewer"
    # Each object by its exact name, never a prefix (slurm.conf, the manifest, the power program).
    clauses = read.inputs["condition"]["expression"].split(" || ")
    assert [re.fullmatch(r'resource\.name == "projects/_/buckets/[^/"]+/objects/([^"*]+)"', c)[1] for c in clauses] == \
        ["head/bin/aicluster-mount-storage", "head/bin/aicluster-nccl-check", "head/aicluster/cluster.json"]
    published = {r.inputs["name"] for r in plan.of_type("gcp:storage/bucketObject:BucketObject")}
    assert {"head/bin/aicluster-nccl-check", "head/aicluster/cluster.json"} <= published


def test_user_data_joins_with_sackd_and_passes_the_schema(plan, tmp_path):
    import subprocess

    (node,) = logins(plan)
    text = reveal(node.inputs["metadata"]["user-data"])
    doc = yaml.safe_load(text)
    names = {p[0] if isinstance(p, list) else p for p in doc["packages"]}
    assert "munge" in names and not {"slurmd", "slurmctld", "sackd"} & names      # Slurm: built at boot
    env = next(f["content"] for f in doc["write_files"] if f["path"] == "/etc/aicluster/login.env")
    assert "AICLUSTER_SLURM_SHA256=" in env and "AICLUSTER_SLURM_URLS=https://github.com/SchedMD/" in env
    assert "AICLUSTER_CLOUD=gcp" in env and "AICLUSTER_MUNGE_SECRET=projects/" in env
    path = tmp_path / "login.yaml"
    path.write_text(text)
    run = subprocess.run(["cloud-init", "schema", "--config-file", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_count_zero_creates_nothing_and_a_bad_type_is_a_spec_error():
    assert not [r for r in run_spec(spec(count=0)).resources if "-login" in r.name]
    with pytest.raises(SpecError) as err:
        parse_spec(spec(instance_type="n2-standard-9"))
    (problem,) = err.value.problems
    assert problem.path == "slurm.login.instance_type" and problem.value == "n2-standard-9"
    assert problem.suggestion and problem.suggestion.startswith("n2-standard-")


def test_user_data_carries_the_compute_nodes_container_installer(plan):
    from aicluster.render.node_local_files import node_local_programs

    (node,) = logins(plan)
    files = {f["path"]: f for f in yaml.safe_load(reveal(node.inputs["metadata"]["user-data"]))["write_files"]}
    containers = files["/opt/aicluster/bin/aicluster-containers"]
    assert containers["content"] == node_local_programs()["aicluster-containers"]
    assert containers["permissions"] == "0755"
