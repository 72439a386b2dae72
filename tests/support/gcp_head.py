"""A GCP head node for tests: a private slurmctld (tests/support/slurmctld.py) whose
ResumeProgram, SuspendProgram and ResumeFailProgram are the real aicluster-gcp-power.py, talking
to the project's fake Compute Engine and Cloud DNS (tests/support/fake_gcp.py) over loopback HTTP,
plus the `aicluster-reconcile` link of the same program, as the head's timer runs it.
(tests/gcp/test_elastic_path_gcp.py, tests/gcp/test_reconcile_gcp.py)"""
from __future__ import annotations

import shlex
from pathlib import Path

from tests.support.node_programs import module_command
from tests.support.slurmctld import RECORDERS, Controller, tool

LINKS = {"aicluster-resume": "resume", "aicluster-suspend": "suspend", "aicluster-resume-fail": "resume-fail",
         "aicluster-reconcile": "reconcile"}


class GcpHeadController(Controller):
    """The rendered configuration, with the GCP power program as slurmctld's power programs.
    Set `cluster_json`, `fake_env` (FakeGcp.env()) and, optionally, `extra_env` before start()."""

    cluster_json: Path | None = None
    fake_env: dict | None = None
    extra_env: dict | None = None

    def _write_recorders(self, bin_dir: Path) -> None:
        super()._write_recorders(bin_dir)          # the prolog (health check) stays a recorder
        scontrol = bin_dir / "scontrol-here"
        scontrol.write_text(f'#!/bin/sh\nexport SLURM_CONF={self.conf}\nexec {tool("scontrol")} "$@"\n')
        scontrol.chmod(0o755)
        env = {"AICLUSTER_CONFIG": str(self.cluster_json), "AICLUSTER_SCONTROL": str(scontrol),
               **(self.fake_env or {}), **(self.extra_env or {})}
        self.programs: dict[str, Path] = {}
        for prog, action in LINKS.items():
            log = self.root / ("reconcile.log" if action == "reconcile" else "power.log")
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**env, "AICLUSTER_LOG": str(log)}.items())
            path = bin_dir / prog
            path.write_text(
                "#!/bin/sh\n"
                f'echo "$(basename "$0") $*" >> {self.calls}\n'
                # What slurmctld told the resume of each job (SLURM_RESUME_FILE), for diagnostics.
                f'[ -n "$SLURM_RESUME_FILE" ] && cat "$SLURM_RESUME_FILE" >> {self.root / "resume-files.log"}\n'
                f"export {exports}\n"
                f'exec {" ".join(module_command("gcp_power"))} {action} "$@"\n')
            path.chmod(0o755)     # slurmctld refuses programs that group or others may write
            self.programs[prog] = path
        assert set(RECORDERS) >= {"aicluster-resume", "aicluster-suspend", "aicluster-resume-fail"}

    def diagnostics(self) -> str:
        logs = [f"--- {p.name}\n{p.read_text()[-6000:]}" for p in (self.root / "power.log", self.root / "reconcile.log",
                                                                    self.root / "resume-files.log")
                if p.exists()]
        return super().diagnostics() + "\n" + "\n".join(logs)
