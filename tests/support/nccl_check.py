"""aicluster-nccl-check loaded as a module, its fake sbatch and its job-script arguments, for
tests/scripts/test_nccl_check.py and tests/scripts/test_nccl_check_nvlink.py."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "components" / "aicluster" / "node" / "bin" / "aicluster-nccl-check"
DATA = ROOT / "tests" / "data" / "nccl"


def _load():
    loader = importlib.machinery.SourceFileLoader("aicluster_nccl_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module      # dataclasses look their module up by name
    loader.exec_module(module)
    return module


check = _load()

FAKE_SBATCH = r'''#!/usr/bin/env python3
"""sbatch --wait stand-in: records its arguments, 'runs' the job on --nodelist or the first
--nodes nodes, and writes the recorded all_reduce_perf output, bandwidth scaled down to the
slowest node's factor (a slow node limits the ring), to --output."""
import json, os, re, sys
from pathlib import Path
state = Path(os.environ["FAKE_SLURM"])
args = sys.argv[1:]
with open(state / "sbatch.calls", "a") as fh:
    fh.write(json.dumps(args) + "\n")
cfg = json.loads((state / "fake.json").read_text())
if cfg.get("fail"):
    print("sbatch: error: Batch job submission failed: Requested node configuration is not available", file=sys.stderr)
    sys.exit(1)
opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
nodes = opts["nodelist"].split(",") if "nodelist" in opts else cfg["nodes"][:int(opts["nodes"])]
factor = min(cfg["slow"].get(n, 1.0) for n in nodes)
# Job ids unique under concurrent submissions (the pair tests run at once), as slurmctld's are.
import fcntl
with open(state / "jobid.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    counter = state / "jobid"
    job = int(counter.read_text()) + 1 if counter.exists() else 100
    counter.write_text(str(job))
def scale(line):
    f = line.split()
    if len(f) == 13 and f[0].isdigit():
        for i in (6, 7, 10, 11):
            f[i] = f"{float(f[i]) * factor:.2f}"
        return "  ".join(f)
    return line
text = Path(cfg["sample"]).read_text().splitlines()
out = Path(opts["output"].replace("%j", str(job)))
out.write_text("# aicluster-nccl-check nodes: " + ",".join(nodes) + "\n" + "\n".join(map(scale, text)) + "\n")
print(job)
'''


class _Args:
    def __init__(self, **kw):
        self.container_image = kw.get("container_image")
        self.binary = kw.get("binary")
