"""pyxis's plugstack.conf (issue 15, deliverable 3) on a real slurmctld, slurmd and sbatch (Debian's
Slurm 22.05).

pyxis is not installed here (it is built on each node against that node's Slurm), so the rendered
file's line `optional /usr/local/lib/slurm/spank_pyxis.so` names a plugin that is missing: Slurm
then parses the file, finds no plugin and goes on, which is what `optional` means (spank(8)). The
test shows that (a) slurmctld starts and a job runs to completion on a real slurmd (which reads
plugstack.conf beside slurm.conf, as a configless node does) with the rendered file, and (b) the
file is really read from there: the same file with `required` instead makes sbatch refuse to run,
so a typo or a `required` line would be caught, not silently ignored.

The Slurm and munge programs and root (slurmd) are required: a missing one fails the test.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from aicluster.catalog.node_local import containers
from aicluster.design.cluster import design_cluster
from aicluster.render.slurm_config import SLURM_CONFIG_FILES, SlurmRuntime, render_slurm_configs
from aicluster.spec.cluster import parse_spec
from tests.support import slurmd_spec, stack_spec
from tests.support.slurmctld import RESUME_TIMEOUT_S, Controller, fields, tool, wait_for

PLUGIN = containers().pyxis.plugin


def _rendered(spec: dict) -> str:
    design = design_cluster(parse_spec(spec))
    return render_slurm_configs(design, SlurmRuntime(controller_host="head", controller_addr="10.0.0.2"))["plugstack.conf"]


def test_plugstack_conf_is_published_with_the_slurm_configuration():
    assert "plugstack.conf" in SLURM_CONFIG_FILES
    text = _rendered(stack_spec("aws-p5-slurm"))
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines == [f"optional {PLUGIN}"]
    assert PLUGIN == "/usr/local/lib/slurm/spank_pyxis.so"     # where pyxis's `make install` puts it


def test_a_real_slurmd_runs_jobs_with_the_rendered_plugstack_conf(tmp_path):
    ctl = Controller("plugstack", design_cluster(parse_spec(slurmd_spec("plugstack"))), tmp_path)
    try:
        ctl.start()
        plugstack = ctl.conf.parent / "plugstack.conf"
        # Programs slurm.conf names that the harness has no recorder for (a TaskProlog, say): a
        # no-op, so the job's fate depends on plugstack.conf alone.
        for program in re.findall(r"^(?:TaskProlog|TaskEpilog|Epilog)=(\S+)", ctl.conf.read_text(), re.M):
            path = Path(program)
            if path.is_relative_to(ctl.root) and not path.exists():
                path.write_text("#!/bin/sh\nexit 0\n")
                path.chmod(0o755)
        assert plugstack.read_text().count(f"optional {PLUGIN}") == 1
        out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", "trn-1", "-o", "/dev/null", "--wrap", "true")
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
        wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
                 RESUME_TIMEOUT_S, ctl.diagnostics)
        ctl.start_slurmd("trn-1")

        def done():
            state = fields(ctl.run("scontrol", "-o", "show", "job", job_id))["JobState"]
            return state if state in ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED") else None

        assert wait_for("the job to finish", done, 120, ctl.diagnostics) == "COMPLETED", ctl.diagnostics()

        # The negative control: `required` with the plugin missing; the client reads the file and
        # refuses (the rendered `optional` line is why the head node's sbatch works without pyxis).
        plugstack.write_text(f"required {PLUGIN}\n")
        refused = subprocess.run([tool("sbatch"), "-N", "1", "-p", "trn", "-o", "/dev/null", "--wrap", "true"],
                                 env=ctl.env, capture_output=True, text=True, timeout=30)
        assert refused.returncode != 0, refused.stdout
        assert "spank" in refused.stderr.lower() or "plugin" in refused.stderr.lower(), refused.stderr
    finally:
        ctl.stop()
