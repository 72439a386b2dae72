"""AIC-STO-005 stateful-storage-protected, over hand-written stacks."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw

RULE = "AIC-STO-005"


def _fsx(**kwargs):
    def program():
        _, subnet, sg = hw.network()
        hw.fsx("fs", subnet, sg, **kwargs)
    return program


def test_protected_and_retained_passes():
    assert hw.check(RULE, _fsx()).status == "pass"


@pytest.mark.parametrize("protect, retain, missing", [
    (False, False, "protect and retainOnDelete"),
    (True, False, "retainOnDelete"),
    (False, True, "protect"),
])
def test_unprotected_persistent_filesystem_fails(protect, retain, missing):
    verdict = hw.check(RULE, _fsx(protect=protect, retain=retain))
    assert verdict.status == "fail"
    assert f"without the resource option(s) {missing}:" in hw.messages(verdict)


def test_protected_with_a_final_backup_passes_without_retain_on_delete():
    """on_delete: snapshot: protected, not retained, and FSx takes a final backup when deleted."""
    assert hw.check(RULE, _fsx(retain=False, skip_final_backup=False)).status == "pass"
    # on_delete: delete: no retain and no final backup is a choice to waive, not a pass.
    verdict = hw.check(RULE, _fsx(retain=False, skip_final_backup=True))
    assert verdict.status == "fail" and "retainOnDelete" in hw.messages(verdict)
    # A final backup does not make up for a missing protect.
    assert hw.check(RULE, _fsx(protect=False, retain=False, skip_final_backup=False)).status == "fail"


def test_scratch_is_exempt_by_default_and_configurable():
    program = _fsx(protect=False, retain=False, capacity=2400, throughput=None, deployment="SCRATCH_2")
    assert hw.check(RULE, program).status == "n/a"
    assert hw.check(RULE, program, {"exemptDeploymentTypes": []}).status == "fail"


def test_protected_databases_pass_and_an_unprotected_cloud_sql_database_fails():
    def program(database_protect):
        def build():
            net, _ = hw.gcp_network()
            hw.cloud_sql("hw-sql", net, database_protect=database_protect)
            _, subnet, sg = hw.network()
            hw.rds_instance("db", subnet, sg)
        return build
    assert hw.check(RULE, program(True)).status == "pass"
    verdict = hw.check(RULE, program(False))
    assert verdict.status == "fail" and len(verdict.violations) == 1
    assert "database 'hw-sql-database' is stateful storage without the resource option(s) protect and " \
           "retainOnDelete" in hw.messages(verdict)
