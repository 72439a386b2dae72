#!/usr/bin/env python3
"""How long the AWS resume program takes to bring up 2,000 nodes under EC2's throttling, against
ResumeTimeout: the measurement tests/scripts/test_power_faults_aws.py made before it asserted
behaviour only (no timing assertion belongs in a test).

    .venv/bin/python bench/power_resume.py [--nodes 2000] [--repeat 3] [--out bench/results]

The real program (aicluster/node/aws_power.py, its own threads and backoff) against an
in-process EC2 with EC2's shapes and throttling (tests/support/fault_proxy.py ThrottledEc2): a
token bucket of 100 per action refilled at 20 a second (the throttling guide's example), the first
20 calls of every action refused outright, 100 ms a call and 5 s a CreateFleet; one job per 8
nodes (SLURM_RESUME_FILE). Time runs TIME_SCALE times faster everywhere alike (latencies, refill,
the program's backoff base and cap, ResumeTimeout), so the ratio of work to deadline is the real
one and a run takes seconds. Reported: the wall time of the resume, scaled back to real seconds,
and its share of ResumeTimeout (the program itself gives up at a third of it). The target (issue
13): the whole resume well inside ResumeTimeout; the report says PASS or MISS, with the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.aws_power import REGION, load_power  # noqa: E402
from tests.support.fault_proxy import ThrottledEc2  # noqa: E402
from plan_scaling import run_meta  # noqa: E402  (bench/ is not a package; it is the script's own folder)

TIME_SCALE = 100
RESUME_TIMEOUT_S = 1800
JOB_SIZE = 8


def one_run(power, nodes: int, work: Path) -> dict:
    """One resume of `nodes` nodes; its wall time and what EC2 saw."""
    record = work / "scontrol.calls"
    scontrol = work / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> "{record}"\n')
    scontrol.chmod(0o755)
    os.environ.update(AICLUSTER_SCONTROL=str(scontrol), AICLUSTER_STATE_DIR=str(work / "state"))
    names = [f"gpu-{n}" for n in range(1, nodes + 1)]
    resume_file = work / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": f"gpu-[1-{nodes}]", "jobs": [
        {"job_id": 1000 + j, "nodes_resume": power.compress_hostlist(names[j * JOB_SIZE:(j + 1) * JOB_SIZE])}
        for j in range((nodes + JOB_SIZE - 1) // JOB_SIZE)]}))
    os.environ["SLURM_RESUME_FILE"] = str(resume_file)
    config = {"cluster": "bench", "region": REGION, "cluster_tag": "aicluster-cluster", "node_tag": "aicluster-node",
              "pool_tag": "aicluster-pool", "resume_timeout_s": RESUME_TIMEOUT_S / TIME_SCALE,
              "pools": {"gpu": {"launch_template_id": "lt-0abc", "instance_type": "p5.48xlarge",
                                "capacity": "on-demand", "min_nodes": 0, "max_nodes": nodes}}}
    ec2 = ThrottledEc2(capacity=100, refill=20 * TIME_SCALE, throttle_first=20,
                       latency=0.1 / TIME_SCALE, fleet_latency=5 / TIME_SCALE)
    started = time.perf_counter()
    failed = power.resume(ec2, config, names)
    elapsed = time.perf_counter() - started
    return {"wall_s": elapsed, "failed": failed, "live": len(ec2.live()), "calls": dict(ec2.calls),
            "throttled": dict(ec2.throttled)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)

    power = load_power()
    power.core.BACKOFF_BASE_S /= TIME_SCALE
    power.core.BACKOFF_CAP_S /= TIME_SCALE
    power.core.log.disabled = True          # its per-node lines; what counts is printed below
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="aicluster-bench-") as tmp:
            runs.append(one_run(power, args.nodes, Path(tmp)))
    median = statistics.median(r["wall_s"] for r in runs)
    real_s = median * TIME_SCALE
    verdict = all(r["failed"] == 0 and r["live"] == args.nodes for r in runs) and real_s < RESUME_TIMEOUT_S / 2
    result = {"nodes": args.nodes, "time_scale": TIME_SCALE, "resume_timeout_s": RESUME_TIMEOUT_S,
              "median_wall_s": median, "real_equivalent_s": real_s,
              "share_of_resume_timeout": real_s / RESUME_TIMEOUT_S,
              "target": "the whole resume within half of ResumeTimeout, every node up", "pass": verdict, "runs": runs,
              **run_meta(args.repeat)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "power_resume.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"resume of {args.nodes} nodes under throttling: {median:.2f} s at {TIME_SCALE}x = {real_s:.0f} s real, "
          f"{100 * real_s / RESUME_TIMEOUT_S:.0f}% of ResumeTimeout ({RESUME_TIMEOUT_S} s): "
          f"{'PASS' if verdict else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
