"""A private slurmctld (tests/support/slurmctld.py) set up for the power programs and the reconcile
loop: a short SuspendTimeout, job ids of its own, a `scontrol` bound to it for the programs, and the
node states as sets. tests/slurm/test_reconcile_aws.py uses it; tests/support/reconcile_controller.py
builds the reconcile tests' controller on it."""
from __future__ import annotations

import random
from pathlib import Path

from tests.support.slurmctld import Controller, fields, tool


class PowerController(Controller):
    """SuspendTimeout=5, so a powered-down node settles in seconds rather than in the real 5 minutes."""

    def write_configs(self, design) -> None:
        super().write_configs(design)
        # Slurm takes the last value of a repeated key (the rendered one comes first). Job ids of
        # their own: a job's cgroup is named by its id machine-wide, and another private slurmctld
        # on this machine (a test running beside this one) ending its job 1 would kill ours.
        first_job_id = 1000 + random.randrange(1_000_000)
        self.conf.write_text(self.conf.read_text() + f"SuspendTimeout=5\nFirstJobId={first_job_id}\n")

    def scontrol_here(self, bin_dir: Path) -> Path:
        """A `scontrol` that talks to this controller, for the programs (AICLUSTER_SCONTROL)."""
        scontrol = bin_dir / "scontrol-here"
        scontrol.write_text(f'#!/bin/sh\nexport SLURM_CONF={self.conf}\nexec {tool("scontrol")} "$@"\n')
        scontrol.chmod(0o755)
        return scontrol

    def stop_slurmd(self) -> None:
        """The node's machine is gone: its slurmd with it."""
        self._stop("slurmd")

    def node(self, name: str) -> dict[str, str]:
        return fields(self.run("scontrol", "-o", "show", "node", name))

    def states(self) -> dict[str, set[str]]:
        """node -> its state and flags (IDLE, CLOUD, POWERED_DOWN, ...)."""
        return {f["NodeName"]: set(f["State"].split("+"))
                for f in map(fields, self.run("scontrol", "-o", "show", "nodes").splitlines())}
