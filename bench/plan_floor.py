#!/usr/bin/env python3
"""Plan time against the SDK floor: `aicluster plan --format json` of aws-p5-slurm (a described
Llama 3 70B workload, so the plan runs the training model's layout search) at 8 and 2,048 nodes,
each next to the time a fresh Python takes just to import the Pulumi SDK and the provider classes
that plan is made of.

Measured side by side in one run: the commands take turns (floor, plan, [baseline plan], floor,
plan, ...) in fresh processes, after one warm-up each, so a busy machine slows them alike; the
median of --repeat runs is reported. With --baseline REF the same plan is also timed from the
files of git revision REF (components/, templates/, policies/ exported to a temporary folder), in
the same turns.

- SDK floor: `import pulumi` plus every provider class behind the plan's resources
  (bench/plan_scaling.py's sdk_floor_script; the cyclic garbage collector off, as in `aicluster`);
- import floor: `python -c "import pulumi, pulumi_aws, pulumi_gcp"` (no resource class: pulumi_aws
  and pulumi_gcp load a module's classes on first use), for reference;
- layout searches: how many times one plan ran the layout search (in-process, perf.search.layouts
  counted), and how long one search takes there;
- where the time goes: a plan in a fresh process that first runs the SDK floor's imports, timed per
  phase (aicluster's imports, the program apart from the layout search, the search, the policy pack,
  the JSON report), median of --repeat runs.

The ratio to the floor is given for the median wall times, for the minima (the least disturbed
run of each) and for the median CPU times (user + system of the process: the steadiest of the
three on a shared machine). Wall times are in the table.

Every process runs with bytecode caching on (PYTHONDONTWRITEBYTECODE removed), as an installed
aicluster runs: the warm-up writes the caches.

    .venv/bin/python bench/plan_floor.py [--repeat 9] [--baseline REF] [--out bench/results]

Writes plan_floor.json and plan_floor.md to --out. Target (issue 24): the plan within 1.25x its SDK
floor, at 8 and at 2,048 nodes.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "components"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_scaling import aicluster_command, run_meta, sdk_floor_script  # noqa: E402  (bench/ is not a package)

BASE_STACK = "aws-p5-slurm"
NODE_COUNTS = (8, 2048)
TARGET = 1.25
IMPORT_FLOOR = "import pulumi, pulumi_aws, pulumi_gcp"


def environment(components: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(components)      # the aicluster of this tree (or the baseline's), not the venv's
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `command` in a fresh process. CPU time (user + system, the child's
    own) suffers less than wall time from other work on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def side_by_side(commands: dict[str, tuple[list[str], dict[str, str]]], repeat: int) -> dict[str, dict]:
    """Each command once to warm up, then `repeat` rounds in which every command runs once."""
    for command, env in commands.values():
        timed(command, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, (command, env) in commands.items():
            times[name].append(timed(command, env))
    out = {}
    for name, t in times.items():
        wall, cpu = [w for w, _ in t], [c for _, c in t]
        out[name] = {"median_s": statistics.median(wall), "min_s": min(wall), "max_s": max(wall), "runs": len(t),
                     "cpu_median_s": statistics.median(cpu), "cpu_min_s": min(cpu)}
    return out


def stack_file(folder: Path, nodes: int) -> Path:
    from aicluster.commands.stacks import read_stack

    base = read_stack(BASE_STACK)
    spec = copy.deepcopy(base.spec_data)
    spec["pools"][0]["max_nodes"] = nodes
    config = {k: v for k, v in base.config.items() if k != "aicluster:cluster"}
    path = folder / f"Pulumi.nodes-{nodes}.yaml"
    path.write_text(yaml.safe_dump({"config": {**config, "aicluster:cluster": spec}}, sort_keys=False))
    return path


def searches_per_plan(path: Path) -> dict:
    """Layout searches in one in-process plan, as `aicluster plan --format json` makes it, and the
    time of one search (a fresh one: the memo cleared)."""
    from aicluster.commands import plan_report
    from aicluster.commands.planner import plan_stack
    from aicluster.design.workload import hardware
    from aicluster.design.workload_shapes import shapes

    search = importlib.import_module("aicluster.perf.search")
    estimate_module = importlib.import_module("aicluster.perf.estimate")
    calls = []
    original = search.layouts

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    patched = [m for m in (search, estimate_module) if hasattr(m, "layouts")]
    for module in patched:
        module.layouts = counted
    try:
        getattr(estimate_module, "clear_search_cache", lambda: None)()
        result = plan_stack(str(path))
        report = plan_report.to_json(result)
    finally:
        for module in patched:
            module.layouts = original
    model, training, hint = shapes(result.design.workload)
    hw, _ = hardware(result.design)
    getattr(estimate_module, "clear_search_cache", lambda: None)()
    start = time.perf_counter()
    estimate_module.estimate(model, training, hw, hint=hint)
    return {"searches": len(calls), "search_s": time.perf_counter() - start,
            "layouts": report["estimate"]["layouts_searched"], "accelerators": hw.count,
            "resources": len(result.plan.custom_resources()), "sdk_floor_script": sdk_floor_script(result.plan)}


# Where a plan's time goes, in one fresh process: the SDK floor's own imports first (so the program's
# time is its own), then aicluster's imports, the program (spec, design, rendering, the resources
# registered under mocks; the layout search apart), the policy pack and the JSON report.
PHASES = r"""
import gc, importlib, json, sys, time
gc.disable()
start = time.perf_counter()
marks = {}
def mark(name, since=[start]):
    now = time.perf_counter(); marks[name] = marks.get(name, 0.0) + now - since[0]; since[0] = now
exec(compile(open(sys.argv[1]).read(), "sdk_floor", "exec"))
mark("SDK floor: pulumi and the plan's provider classes")
from aicluster.commands import plan_report
from aicluster.commands.planner import plan_stack
import aicluster.commands.check
mark("aicluster imports")
estimate = importlib.import_module("aicluster.perf.estimate")
search, searched = getattr(estimate, "_search", None), [0.0]
if search is not None:
    def timed_search(*args):
        t = time.perf_counter(); out = search(*args); searched[0] += time.perf_counter() - t; return out
    estimate._search = timed_search
verdicts = plan_report._verdicts
def timed_verdicts(*args):
    mark("program: spec, design, rendering, resources under mocks"); out = verdicts(*args)
    mark("policy pack"); return out
plan_report._verdicts = timed_verdicts
report = json.dumps(plan_report.to_json(plan_stack(sys.argv[2])), indent=2, sort_keys=True)
mark("report and JSON")
marks["program: spec, design, rendering, resources under mocks"] -= searched[0]
marks["layout search"] = searched[0]
marks["total"] = time.perf_counter() - start
print(json.dumps(marks))
"""


def phases(script: Path, floor: Path, path: Path, env: dict[str, str], repeat: int) -> dict:
    """Per phase of a plan in a fresh process: the median over `repeat` runs."""
    runs = []
    for _ in range(repeat + 1):
        run = subprocess.run([sys.executable, str(script), str(floor), str(path)], cwd=ROOT, env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"phases failed ({run.returncode}):\n{run.stderr}")
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    runs = runs[1:]                          # the first one warms the caches
    return {name: statistics.median(r[name] for r in runs) for name in runs[0]}


COUNT_SEARCHES = r"""
import importlib, sys
from aicluster.commands import plan_report
from aicluster.commands.planner import plan_stack
search, calls = importlib.import_module("aicluster.perf.search"), []
original = search.layouts
def counted(*args, **kwargs):
    calls.append(1); return original(*args, **kwargs)
for name in ("aicluster.perf.search", "aicluster.perf.estimate"):
    module = importlib.import_module(name)
    if hasattr(module, "layouts"):
        module.layouts = counted
plan_report.to_json(plan_stack(sys.argv[1]))
print(len(calls))
"""


def searches_in(env: dict[str, str], path: Path) -> int:
    """Layout searches of one plan and JSON report, made by the aicluster that `env` imports."""
    run = subprocess.run([sys.executable, "-c", COUNT_SEARCHES, str(path)], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise SystemExit(f"counting searches failed ({run.returncode}):\n{run.stderr}")
    return int(run.stdout.strip().splitlines()[-1])


def baseline_tree(ref: str, folder: Path) -> Path:
    archive = subprocess.run(["git", "archive", ref, "components", "templates", "policies"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "components"


def measure(repeat: int, baseline: str | None) -> dict:
    python = sys.executable
    aicluster = aicluster_command()
    here = environment(ROOT / "components")
    out: dict = {"nodes": {}}
    with tempfile.TemporaryDirectory(prefix="aicluster-bench-") as tmp:
        folder = Path(tmp)
        base_env = None
        if baseline:
            (folder / "baseline").mkdir()
            base_env = environment(baseline_tree(baseline, folder / "baseline"))
        for nodes in NODE_COUNTS:
            path = stack_file(folder, nodes)
            entry = searches_per_plan(path)
            floor = folder / f"sdk_floor_{nodes}.py"
            floor.write_text(entry.pop("sdk_floor_script"))
            commands = {"sdk_floor": ([python, str(floor)], here),
                        "import_floor": ([python, "-c", IMPORT_FLOOR], here),
                        "plan": ([*aicluster, "plan", "--format", "json", str(path)], here)}
            if base_env is not None:
                entry["baseline_searches"] = searches_in(base_env, path)
                commands["baseline_plan"] = ([*aicluster, "plan", "--format", "json", str(path)], base_env)
            entry.update(side_by_side(commands, repeat))
            script = folder / "phases.py"
            script.write_text(PHASES)
            entry["phases"] = phases(script, floor, path, here, repeat)
            entry["x_sdk_floor"] = entry["plan"]["median_s"] / entry["sdk_floor"]["median_s"]
            entry["x_sdk_floor_min"] = entry["plan"]["min_s"] / entry["sdk_floor"]["min_s"]
            entry["x_sdk_floor_cpu"] = entry["plan"]["cpu_median_s"] / entry["sdk_floor"]["cpu_median_s"]
            if base_env is not None:
                entry["baseline_x_sdk_floor"] = entry["baseline_plan"]["median_s"] / entry["sdk_floor"]["median_s"]
                entry["baseline_x_sdk_floor_min"] = entry["baseline_plan"]["min_s"] / entry["sdk_floor"]["min_s"]
                entry["baseline_x_sdk_floor_cpu"] = (entry["baseline_plan"]["cpu_median_s"]
                                                     / entry["sdk_floor"]["cpu_median_s"])
            out["nodes"][nodes] = entry
            print(f"  {nodes} nodes: plan {entry['plan']['median_s']:.3f} s = {entry['x_sdk_floor']:.2f}x "
                  f"the SDK floor ({entry['sdk_floor']['median_s']:.3f} s)", file=sys.stderr)
    return out


def markdown(m: dict, meta: dict) -> str:
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    baseline = meta.get("baseline")
    head = ("| nodes | accelerators | resources | layout searches per plan | one search (in-process) | import floor | "
            "SDK floor | plan | x SDK floor (median) | x SDK floor (min) | x SDK floor (CPU) |")
    rule = "|---|---|---|---|---|---|---|---|---|---|---|"
    if baseline:
        head += (f" searches at {baseline} | plan at {baseline} | x SDK floor (median) | x SDK floor (min) | "
                 "x SDK floor (CPU) |")
        rule += "---|---|---|---|---|"
    lines = [
        "# Plan time against the SDK floor",
        "",
        f"`{meta['command']}`, {meta['date']}, commit {meta['commit']}, Python {meta['python']}, {meta['platform']}, "
        f"{meta['cpus']} CPUs; median of {meta['repeat']} fresh processes per cell, the commands taking turns.",
        "",
        *([f"Baseline {baseline}: {meta['baseline_label']}.", ""] if baseline and meta.get("baseline_label") else []),
        head,
        rule,
    ]
    for nodes, e in m["nodes"].items():
        row = (f"| {nodes} | {e['accelerators']} | {e['resources']} | {e['searches']} | {ms(e['search_s'])} | "
               f"{ms(e['import_floor']['median_s'])} | {ms(e['sdk_floor']['median_s'])} | "
               f"{ms(e['plan']['median_s'])} | "
               f"{e['x_sdk_floor']:.2f} | {e['x_sdk_floor_min']:.2f} | {e['x_sdk_floor_cpu']:.2f} |")
        if baseline:
            row += (f" {e['baseline_searches']} | {ms(e['baseline_plan']['median_s'])} | "
                    f"{e['baseline_x_sdk_floor']:.2f} | "
                    f"{e['baseline_x_sdk_floor_min']:.2f} | {e['baseline_x_sdk_floor_cpu']:.2f} |")
        lines.append(row)
    names = list(next(iter(m["nodes"].values()))["phases"])
    lines += ["", "Where a plan's time goes (one fresh process per run, the SDK floor's imports first; median ms):", "",
              "| phase | " + " | ".join(f"{n} nodes" for n in m["nodes"]) + " |",
              "|---|" + "---|" * len(m["nodes"])]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{e['phases'][name] * 1000:.0f}" for e in m["nodes"].values()) + " |")
    lines += ["", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {v['target']} | {v['value']} | {'PASS' if v['pass'] else 'MISS'} |" for v in m["verdicts"]]
    lines += ["", f"{BASE_STACK} with pools[0].max_nodes set; `aicluster plan --format json FILE` "
              "SDK floor: `import pulumi` plus every provider class the plan's "
              "resources are made of, the cyclic garbage collector off (bench/plan_scaling.py). Import floor: "
              f"`python -c \"{IMPORT_FLOOR}\"`. Layout searches: perf.search.layouts calls in one in-process plan "
              "and report (the estimate, the monitoring thresholds, the policy pack's verdicts).", ""]
    return "\n".join(lines)


def verdicts(m: dict) -> list[dict]:
    out = []
    for nodes, e in m["nodes"].items():
        out.append({"target": f"{nodes}-node plan <= {TARGET}x its SDK floor", "value": f"{e['x_sdk_floor']:.2f}x",
                    "pass": e["x_sdk_floor"] <= TARGET})
        out.append({"target": f"{nodes}-node plan: one layout search", "value": str(e["searches"]),
                    "pass": e["searches"] == 1})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds of fresh processes (median)")
    parser.add_argument("--baseline", help="a git revision whose plan is timed in the same rounds")
    parser.add_argument("--baseline-label", help="what the baseline revision is, for the report")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    command = f".venv/bin/python bench/plan_floor.py --repeat {args.repeat}" + \
        (f" --baseline {args.baseline}" if args.baseline else "") + \
        (f" --baseline-label '{args.baseline_label}'" if args.baseline_label else "")
    meta = run_meta(args.repeat, command=command, baseline=args.baseline, baseline_label=args.baseline_label)
    print(f"measuring ({args.repeat} rounds) ...", file=sys.stderr)
    m = measure(args.repeat, args.baseline)
    m["verdicts"] = verdicts(m)
    m["meta"] = meta
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan_floor.json").write_text(json.dumps(m, indent=2, sort_keys=True, default=str) + "\n")
    (args.out / "plan_floor.md").write_text(markdown(m, meta))
    print(markdown(m, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
