"""The NVLink-domain drain against a real slurmctld: the GPU health check (HealthCheckProgram role)
of an NVL72 node whose IMEX domain is degraded by another node drains its node with the domain's
reason, the reconcile loop reads that reason as not its own to replace, and the check resumes the
node once the domain is whole. The node's tools are the stubs of
tests/support/imex.py; scontrol is the real one, talking to a private
slurmctld on the rendered configuration (tests/support/slurmctld.py).

Needs root, slurmctld and munged: a missing one fails the test (never skips).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from aicluster.design.cluster import design_cluster
from aicluster.node import reconcile
from aicluster.spec.cluster import parse_spec
from tests.support.imex import Nvl72Node, domain_status, down
from tests.support import slurmd_spec
from tests.support.slurmctld import Controller, tool


def test_the_script_and_the_reconcile_loop_agree_on_the_domain_reason():
    from aicluster.node import slurm as core
    script = (Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin"
              / "aicluster-gpu-healthcheck").read_text()
    assert f"\nDOMAIN_REASON={core.IMEX_DOMAIN_REASON}\n" in script
    assert core.IMEX_DOMAIN_REASON not in reconcile.OUR_REASONS


def test_a_degraded_domain_drains_with_its_own_reason_and_the_check_lifts_it(tmp_path):
    ctl = Controller("imex", design_cluster(parse_spec(slurmd_spec("imex"))), tmp_path / "ctl")
    (tmp_path / "node").mkdir()
    node = Nvl72Node(tmp_path / "node")
    (node.bin / "scontrol").unlink()        # the real one, below
    system = ":".join(sorted({str(Path(tool("scontrol")).parent), str(Path(shutil.which("bash")).parent)}))
    env = {"PATH": f"{node.bin}:{system}", "SLURM_CONF": str(ctl.conf), "SLURMD_NODENAME": "trn-1"}
    try:
        ctl.start()
        node.imex(n=domain_status(links=down(10), domain="DEGRADED"))
        run = node.run(env)
        assert run.returncode == 1, run.stderr
        line = ctl.run("scontrol", "-o", "show", "node", "trn-1").strip()
        assert "DRAIN" in re.search(r"State=(\S+)", line).group(1), line
        assert re.search(r"Reason=aicluster-imex-domain: imex: IMEX domain DEGRADED: 17/18 nodes connected", line), line
        # The reconcile loop's own reading of slurmctld's line: drained, but not one it replaces.
        (seen,) = reconcile.parse_nodes(line + "\n").values()
        assert seen.drained and not seen.ours and seen.by_hand

        node.imex()                           # the domain is whole again
        run = node.run(env)
        assert run.returncode == 0, run.stderr
        assert "resumed trn-1" in run.stderr
        line = ctl.run("scontrol", "-o", "show", "node", "trn-1")
        assert "DRAIN" not in re.search(r"State=(\S+)", line).group(1), line
    finally:
        ctl.stop()
