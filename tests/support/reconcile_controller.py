"""A real slurmctld whose power programs and reconcile loop run on one FileCloud
(tests/support/reconcile_fakes.py), and the helpers the reconcile tests with real daemons share
(tests/slurm/test_reconcile.py, test_reconcile_roll.py)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.reconcile_fakes import FileCloud, core, install_power_programs
from tests.support.power_controller import PowerController
from tests.support.slurmctld import COMMAND_TIMEOUT_S, RESUME_TIMEOUT_S, fields, wait_for

MAX_PASSES = 6          # the bound the issue asks for: recovery within N passes
SETTLE_S = 60           # SuspendTimeout (5 s here) and the power programs' runs


class ReconcileController(PowerController):
    """PowerController's daemons, with the power programs and the reconcile loop on a FileCloud."""

    cloud_file: Path
    cluster_json: Path
    state_dir: Path

    def _write_recorders(self, bin_dir: Path) -> None:
        super()._write_recorders(bin_dir)          # the prolog (health check) stays a recorder
        self.programs = install_power_programs(bin_dir, {
            "AICLUSTER_CONFIG": str(self.cluster_json), "AICLUSTER_SCONTROL": str(self.scontrol_here(bin_dir)),
            "AICLUSTER_STATE_DIR": str(self.state_dir), "AICLUSTER_FAKE_CLOUD": str(self.cloud_file)})

    def reconcile(self) -> int:
        done = subprocess.run([str(self.programs["aicluster-reconcile"])], env=self.env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S * 4)
        self.passes = getattr(self, "passes", 0) + 1
        assert self.passes <= MAX_PASSES, f"more than {MAX_PASSES} passes\n{self.diagnostics()}"
        return done.returncode

    def diagnostics(self) -> str:
        logs = [f"--- {p.name}\n{p.read_text()[-4000:]}" for p in (self.root / "power.log", self.root / "reconcile.log")
                if p.exists()]
        return super().diagnostics() + "\n" + "\n".join(logs) + f"\n--- cloud\n{json.dumps(self.cloud.live(), indent=1)}"

    @property
    def cloud(self) -> FileCloud:
        return FileCloud(self.cloud_file, self.design.name)


def instances_of(ctl: ReconcileController, node: str | None) -> list[str]:
    return sorted(iid for iid, item in ctl.cloud.live().items() if item["node"] == node)


def launched(ctl: ReconcileController, node: str) -> str:
    return wait_for(f"the resume program to launch {node}", lambda: (instances_of(ctl, node) or [None])[-1],
                    RESUME_TIMEOUT_S, ctl.diagnostics)


def pending(ctl: ReconcileController) -> dict:
    path = ctl.state_dir / core.PENDING_SUSPEND
    return json.loads(path.read_text()) if path.exists() else {}


def job_state(ctl: ReconcileController, job_id: str) -> str:
    return fields(ctl.run("scontrol", "-o", "show", "job", job_id))["JobState"]


def submit(ctl: ReconcileController, node: str, command: str) -> str:
    out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", node, "-o", "/dev/null", "--wrap", command)
    return re.search(r"Submitted batch job (\d+)", out).group(1)


def settle(ctl: ReconcileController) -> None:
    """Until no node is on its way down (SuspendTimeout) and no power program is still running."""
    wait_for("no node POWERING_DOWN", lambda: not any("POWERING_DOWN" in s for s in ctl.states().values()),
             SETTLE_S, ctl.diagnostics)


def consistent(ctl: ReconcileController) -> list[str]:
    """The issue's invariant: what breaks it, or []."""
    states, problems = ctl.states(), []
    for iid, item in ctl.cloud.live().items():
        node = states.get(item["node"] or "")
        if node is None or "POWERED_DOWN" in node:
            problems.append(f"{iid} runs for {item['node']} ({'+'.join(sorted(node or []))})")
    return problems


def up(ctl: ReconcileController, node: str) -> bool:
    return ctl.node(node)["State"] == "IDLE+CLOUD"
