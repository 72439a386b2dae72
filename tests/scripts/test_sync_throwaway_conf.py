"""The head sync's throwaway slurmctld tests a new configuration without touching accounting:
slurm.conf's link to slurmdbd is left out, never set to accounting_storage/none (Slurm 23.11
removed that plugin, and the throwaway must not register with the real slurmdbd). Its first start
would also be fatal with a database it cannot reach, and gres TRES need slurmdbd
(tests/slurm/test_real_slurmdbd.py shows both on the real daemons)."""
from __future__ import annotations

from aicluster.node import sync as sync_program
from tests.support import stack_spec


def _sync():
    return sync_program


def _managed_conf() -> str:
    from aicluster.design.cluster import design_cluster
    from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
    from aicluster.spec.cluster import parse_spec

    design = design_cluster(parse_spec(stack_spec("aws-p5-slurm")))
    assert design.slurm.accounting_settings.mode == "managed"
    runtime = SlurmRuntime(controller_host="p5-train-head", controller_addr="10.0.0.10",
                           accounting_host="p5-train-head")
    return render_slurm_configs(design, runtime)["slurm.conf"]


def test_the_throwaway_has_no_accounting_link_and_keeps_the_rest(tmp_path):
    sync = _sync()
    conf = _managed_conf()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf
    private = sync.private_conf(conf, str(tmp_path), 47000)
    keys = [line.split("=", 1)[0].lower() for line in private.splitlines() if "=" in line and not line.startswith("#")]
    assert not [k for k in keys if k.startswith("accountingstorage")]
    assert "accounting_storage/none" not in private
    assert "PriorityType=priority/multifactor" in private.splitlines()     # tested as written
    # The throwaway's own state and port (the sync writes its overrides in lower case).
    assert {f"statesavelocation={tmp_path}/state", "slurmctldport=47000"} <= set(private.splitlines())
