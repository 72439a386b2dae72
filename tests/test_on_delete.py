"""`on_delete` (spec/teardown.py, docs/teardown.md): the spec takes retain | snapshot | delete per
stored thing, `snapshot` only where the cloud backs that kind up, and the program turns the policy
into the options and final-backup fields on the resource itself, on AWS and on GCP."""
from __future__ import annotations

import pytest

from aicluster.design.stateful import stateful_resources
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support.stack_plans import plan_with_spec, stack_spec_data

AWS, GCP = "aws-p5-slurm", "gcp-a3mega-slurm"


def _with_policy(stack: str, policy: str, head: str | None = None, metrics: str | None = None) -> dict:
    spec = stack_spec_data(stack)
    for fs in spec["storage"]:
        fs["on_delete"] = policy if not (policy == "snapshot" and fs["type"] == "lustre" and spec["cloud"] == "gcp") \
            else "delete"
    spec.setdefault("slurm", {})["accounting"] = "managed"
    spec["slurm"]["accounting_on_delete"] = policy
    spec["slurm"].setdefault("head_node", {})["on_delete"] = head or ("retain" if policy == "retain" else "delete")
    spec.setdefault("monitoring", {})["on_delete"] = metrics or ("retain" if policy == "retain" else "delete")
    return spec


def _by_name(plan, suffix: str):
    found = [r for r in plan.resources if r.name.endswith(suffix) and r.custom
             and (suffix != "-slurm-head" or r.type.endswith("/instance:Instance"))]
    assert len(found) == 1, (suffix, [r.name for r in found])
    return found[0]


# --- the spec ------------------------------------------------------------------------------


def _problems(spec: dict) -> list:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    return caught.value.problems


@pytest.mark.parametrize("entry, why", [
    ({"name": "scr", "type": "lustre", "mount": "/scr", "capacity_gib": 1200, "deployment_type": "SCRATCH_2"},
     "scratch"),
    ({"name": "lnk", "type": "lustre", "mount": "/lnk", "capacity_gib": 1200, "import_path": "s3://bucket/data"},
     "linked to S3"),
])
def test_snapshot_is_refused_where_fsx_takes_no_backup(entry, why):
    spec = stack_spec_data(AWS)
    spec["storage"].append({**entry, "on_delete": "snapshot"})
    [problem] = _problems(spec)
    assert problem.path == "storage[2].on_delete" and problem.value == "snapshot"
    assert "retain or delete" in problem.allowed and why in problem.allowed


def test_snapshot_is_refused_for_managed_lustre_the_head_and_the_metrics():
    spec = stack_spec_data(GCP)
    spec["storage"][0]["on_delete"] = "snapshot"          # Managed Lustre
    spec["slurm"] = {**spec.get("slurm", {}), "head_node": {"on_delete": "snapshot"}}
    spec["monitoring"] = {"on_delete": "snapshot"}
    problems = {p.path: p for p in _problems(spec)}
    assert set(problems) == {"storage[0].on_delete", "slurm.head_node.on_delete", "monitoring.on_delete"}
    assert "Managed Lustre has no backup" in problems["storage[0].on_delete"].allowed
    assert all("retain or delete" in p.allowed for p in problems.values())


def test_snapshot_is_taken_where_the_cloud_backs_the_kind_up():
    parse_spec(_with_policy(AWS, "snapshot", head="delete", metrics="delete"))     # FSx persistent, EFS, RDS
    parse_spec(_with_policy(GCP, "snapshot", head="delete", metrics="delete"))     # Filestore, Cloud SQL


def test_a_misspelled_policy_names_the_allowed_values_and_a_close_match():
    spec = stack_spec_data(AWS)
    spec["storage"][0]["on_delete"] = "snapshots"
    [problem] = _problems(spec)
    assert problem.path == "storage[0].on_delete"
    assert "retain, snapshot, delete" in problem.allowed and problem.suggestion == "snapshot"


def test_policies_only_where_they_apply():
    spec = stack_spec_data(AWS)
    spec["slurm"]["accounting"] = "head"
    spec["slurm"]["accounting_on_delete"] = "delete"
    spec["storage"].append({"name": "scr", "type": "lustre", "mount": "/scr", "capacity_gib": 1200,
                            "deployment_type": "SCRATCH_2", "protect": False, "on_delete": "retain"})
    problems = {p.path: p for p in _problems(spec)}
    assert set(problems) == {"slurm.accounting_on_delete", "storage[2].on_delete"}
    assert "slurm.head_node.on_delete" in problems["slurm.accounting_on_delete"].allowed
    assert "protect: false" in problems["storage[2].on_delete"].allowed


def test_every_policy_defaults_to_retain():
    spec = parse_spec(stack_spec_data(AWS))
    assert {fs.on_delete for fs in spec.storage} == {"retain"}
    assert (spec.slurm.accounting_on_delete, spec.slurm.head_node.on_delete, spec.monitoring.on_delete) == \
        ("retain", "retain", "retain")


# --- the program, AWS ------------------------------------------------------------------------


def test_aws_retain_is_todays_protection():
    plan = plan_with_spec(AWS, _with_policy(AWS, "retain"))
    assert all(r.protect and r.retain_on_delete for r in stateful_resources(plan.resources))
    fsx = _by_name(plan, "-fsx-fs")
    assert fsx.inputs["skipFinalBackup"] is False and "finalBackupTags" not in fsx.inputs
    db = _by_name(plan, "-slurmdbd-db")
    assert (db.inputs["deletionProtection"], db.inputs["skipFinalSnapshot"]) == (True, False)
    assert db.inputs["finalSnapshotIdentifier"] == "p5-train-slurmdbd-final"
    assert _by_name(plan, "-slurm-head").inputs["disableApiTermination"] is True


def test_aws_snapshot_deletes_with_a_final_backup_and_stays_protected():
    plan = plan_with_spec(AWS, _with_policy(AWS, "snapshot"))
    fsx, efs, db = _by_name(plan, "-fsx-fs"), _by_name(plan, "-home-fs"), _by_name(plan, "-slurmdbd-db")
    for r in (fsx, efs, db):
        assert r.protect and not r.retain_on_delete, r.name
    assert fsx.inputs["skipFinalBackup"] is False
    assert fsx.inputs["finalBackupTags"]["Name"] == "p5-train-fsx-final"
    assert fsx.inputs["finalBackupTags"]["aicluster-cluster"] == "p5-train"
    assert (db.inputs["deletionProtection"], db.inputs["skipFinalSnapshot"]) == (False, False)
    assert db.inputs["finalSnapshotIdentifier"] == "p5-train-slurmdbd-final"


def test_aws_delete_skips_every_final_backup():
    plan = plan_with_spec(AWS, _with_policy(AWS, "delete"))
    assert all(r.protect and not r.retain_on_delete for r in stateful_resources(plan.resources))
    assert _by_name(plan, "-fsx-fs").inputs["skipFinalBackup"] is True
    db = _by_name(plan, "-slurmdbd-db")
    assert (db.inputs["deletionProtection"], db.inputs["skipFinalSnapshot"]) == (False, True)
    assert _by_name(plan, "-slurm-head").inputs["disableApiTermination"] is False
    for suffix in ("-observability-workspace", "-observability-alerts-key", "-slurm-munge", "-slurm-munge-bytes"):
        assert not _by_name(plan, suffix).retain_on_delete, suffix


def test_aws_the_slurmdbd_password_stays_while_the_database_or_the_head_does():
    spec = _with_policy(AWS, "delete", head="delete")
    spec["slurm"]["accounting_on_delete"] = "retain"
    plan = plan_with_spec(AWS, spec)
    assert _by_name(plan, "-slurm-slurmdbd").retain_on_delete          # it opens the kept database
    assert _by_name(plan, "-slurm-slurmdbd-password").retain_on_delete
    assert not _by_name(plan, "-slurm-munge").retain_on_delete         # the head goes: its key goes
    assert _by_name(plan, "-slurmdbd-db").retain_on_delete


def test_an_unprotected_filesystem_is_neither_protected_nor_retained():
    spec = stack_spec_data(AWS)
    spec["storage"].append({"name": "scr", "type": "lustre", "mount": "/scr", "capacity_gib": 1200,
                            "deployment_type": "SCRATCH_2", "protect": False})
    scratch = _by_name(plan_with_spec(AWS, spec), "-scr-fs")
    assert (scratch.protect, scratch.retain_on_delete, scratch.inputs["skipFinalBackup"]) == (False, False, True)


# --- the program, GCP ------------------------------------------------------------------------


def test_gcp_retain_is_todays_protection():
    plan = plan_with_spec(GCP, _with_policy(GCP, "retain"))
    assert all(r.protect and r.retain_on_delete for r in stateful_resources(plan.resources))
    home = _by_name(plan, "-home-fs")
    assert home.inputs["deletionProtectionEnabled"] is True
    db = _by_name(plan, "-slurmdbd-db")
    assert db.inputs["deletionProtection"] is True and db.inputs["settings"]["deletionProtectionEnabled"] is True
    assert "finalBackupConfig" not in db.inputs["settings"]
    head = _by_name(plan, "-slurm-head")
    assert head.inputs["deletionProtection"] is True and head.inputs["bootDisk"]["autoDelete"] is False
    assert _by_name(plan, "-slurm-munge").inputs["deletionProtection"] is True


def test_gcp_snapshot_takes_cloud_sqls_final_backup_and_unlocks_filestore():
    plan = plan_with_spec(GCP, _with_policy(GCP, "snapshot"))
    home, db = _by_name(plan, "-home-fs"), _by_name(plan, "-slurmdbd-db")
    assert home.protect and not home.retain_on_delete and home.inputs["deletionProtectionEnabled"] is False
    assert db.protect and not db.retain_on_delete
    assert db.inputs["deletionProtection"] is False and db.inputs["settings"]["deletionProtectionEnabled"] is False
    assert db.inputs["settings"]["finalBackupConfig"] == {"enabled": True, "retentionDays": 365}
    assert "final backup" in db.inputs["finalBackupDescription"]
    assert _by_name(plan, "-slurmdbd-database").retain_on_delete is False


def test_gcp_delete_leaves_no_deletion_protection_behind():
    plan = plan_with_spec(GCP, _with_policy(GCP, "delete"))
    assert all(r.protect and not r.retain_on_delete for r in stateful_resources(plan.resources))
    db = _by_name(plan, "-slurmdbd-db")
    assert "finalBackupConfig" not in db.inputs["settings"]
    head = _by_name(plan, "-slurm-head")
    assert head.inputs["deletionProtection"] is False and head.inputs["bootDisk"]["autoDelete"] is True
    assert _by_name(plan, "-slurm-munge").inputs["deletionProtection"] is False
    assert _by_name(plan, "-scratch-fs").retain_on_delete is False


def test_the_plan_says_what_destroy_does_with_each_stored_thing():
    from aicluster.commands import plan_report
    from tests.support.stack_plans import result_with_spec

    retained = "\n".join(plan_report.text(result_with_spec(AWS, _with_policy(AWS, "retain"))))
    assert "protected + retained" in retained and "on destroy" not in retained
    spec = _with_policy(AWS, "snapshot")
    spec["storage"][1]["on_delete"] = "delete"
    lines = plan_report.text(result_with_spec(AWS, spec))
    assert any(line.startswith("  fsx:") and "protected; on destroy: snapshot" in line for line in lines)
    assert any(line.startswith("  home:") and "protected; on destroy: delete" in line for line in lines)
    assert any("Amazon RDS" in line and "protected; on destroy: snapshot" in line for line in lines)
