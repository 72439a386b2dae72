#!/usr/bin/env python3
"""Plan-time scaling benchmark: how long `aicluster plan` takes, against what floor, and whether
it grows with the cluster.

Measured side by side in one run, each command in a fresh process (what a user waits for, from
exec to exit), repeated and reported as the median:

- the Python import floor, `python -c "import pulumi, pulumi_aws"` (pulumi_aws loads its
  submodules lazily, so this floor holds none of the resource classes a program uses);
- the SDK floor of each stack: `import pulumi` plus every provider class that stack's resources
  are made of (the part of any Pulumi program's start-up that no program can avoid);
- `aicluster plan --stack S` for every stack in stacks/, with its resource count;
- `aicluster plan` of aws-p5-slurm with pools[0].max_nodes = 8, 64, 512, 2048, 8192, and with 1,
  4 and 16 pools, also timed in-process (the program alone, imports done);
- `aicluster check --all`.

    .venv/bin/python bench/plan_scaling.py [--repeat 5] [--out bench/results]

Writes plan_scaling.json and plan_scaling.md to --out. Targets (issue 8): the resource count does
not depend on the node count; a 2048-node plan takes at most 1.25x an 8-node plan; every example
stack plans within 3x the import floor. The report says PASS or MISS for each, with the numbers.
"""
from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_STACK = "aws-p5-slurm"
NODE_COUNTS = (8, 64, 512, 2048, 8192)
POOL_COUNTS = (1, 4, 16)
SDK_PACKAGES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "random": "pulumi_random", "kubernetes": "pulumi_kubernetes"}


def aicluster_command() -> list[str]:
    script = Path(sys.executable).with_name("aicluster")
    return [str(script)] if script.exists() else [sys.executable, "-m", "aicluster.cli"]


def wall(command: list[str], repeat: int) -> dict:
    """Median and min wall time of `command` in a fresh process each time (after one warm-up run,
    so the OS file cache is warm, as it is for a user's second command)."""
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if run.returncode not in ((0, 1) if "check" in command else (0,)):   # check: 1 = a violation found
            raise SystemExit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stderr}")
    return {"median_s": statistics.median(times), "min_s": min(times), "runs": len(times)}


def in_process(path: str, repeat: int) -> dict:
    """plan_stack(path) in this process, imports and caches warm: the program's own time."""
    import gc

    from aicluster.commands.planner import plan_stack

    result = plan_stack(path)
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()   # as the aicluster command runs (components/aicluster/cli.py)
        start = time.perf_counter()
        plan_stack(path)
        times.append(time.perf_counter() - start)
        gc.enable()
    return {"median_s": statistics.median(times), "min_s": min(times),
            "resources": len(result.plan.custom_resources())}


def sdk_floor_script(plan) -> str:
    """`import pulumi` and every provider class behind the plan's resource types (the cyclic
    garbage collector off, as in the aicluster command, so the two compare like for like)."""
    import importlib
    import re

    lines = ["import gc", "gc.disable()", "import pulumi"]
    for type_token in sorted({r.type for r in plan.custom_resources()}):
        package, _, rest = type_token.partition(":")
        module, _, cls = rest.rpartition(":")
        if package not in SDK_PACKAGES or not cls:
            continue
        if package != "kubernetes":      # aws:ec2/vpc:Vpc -> ec2; kubernetes:core/v1:Namespace -> core/v1
            module = module.rpartition("/")[0]
        sdk = SDK_PACKAGES[package]
        path = sdk if module == "index" else f"{sdk}.{module.replace('.sh/', '.').replace('/', '.')}"
        if not re.fullmatch(r"[A-Za-z_][\w.]*", path):
            continue   # a custom resource (CRD): made by the SDK's generic CustomResource class
        try:
            getattr(importlib.import_module(path), cls)
        except (ImportError, AttributeError):
            continue
        lines.append(f"import {path}; {path}.{cls}")
    return "\n".join(lines)


def stack_file(folder: Path, name: str, spec: dict, config: dict) -> str:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": {**config, "aicluster:cluster": spec}}, sort_keys=False))
    return str(path)


def measure(repeat: int) -> dict:
    from aicluster.commands.planner import plan_stack
    from aicluster.commands.stacks import read_stack, stack_names

    cli = aicluster_command()
    python = [sys.executable, "-c"]
    out: dict = {"floors": {}, "stacks": {}, "nodes": {}, "pools": {}}
    out["floors"]["python"] = wall([*python, "pass"], repeat)
    out["floors"]["import pulumi, pulumi_aws"] = wall([*python, "import pulumi, pulumi_aws"], repeat)

    for stack in stack_names():
        result = plan_stack(stack)
        entry = wall([*cli, "plan", "--stack", stack], repeat)
        entry["resources"] = len(result.plan.custom_resources())
        entry["sdk_floor"] = wall([*python, sdk_floor_script(result.plan)], repeat)
        entry["in_process"] = in_process(stack, repeat)
        out["stacks"][stack] = entry
        print(f"  plan {stack}: {entry['median_s']:.3f} s, {entry['resources']} resources", file=sys.stderr)

    base = read_stack(BASE_STACK)
    with tempfile.TemporaryDirectory(prefix="aicluster-bench-") as tmp:
        folder = Path(tmp)
        for nodes in NODE_COUNTS:
            spec = copy.deepcopy(base.spec_data)
            spec["pools"][0]["max_nodes"] = nodes
            path = stack_file(folder, f"nodes-{nodes}", spec, {k: v for k, v in base.config.items()
                                                                if k != "aicluster:cluster"})
            entry = wall([*cli, "plan", path], repeat)
            entry["in_process"] = in_process(path, repeat)
            entry["resources"] = entry["in_process"]["resources"]
            out["nodes"][nodes] = entry
            print(f"  plan {nodes} nodes: {entry['median_s']:.3f} s", file=sys.stderr)
        for count in POOL_COUNTS:
            spec = copy.deepcopy(base.spec_data)
            spec["pools"] = [{**spec["pools"][0], "name": f"gpu{i + 1}"} for i in range(count)]
            path = stack_file(folder, f"pools-{count}", spec, {k: v for k, v in base.config.items()
                                                               if k != "aicluster:cluster"})
            entry = wall([*cli, "plan", path], repeat)
            entry["in_process"] = in_process(path, repeat)
            entry["resources"] = entry["in_process"]["resources"]
            out["pools"][count] = entry
            print(f"  plan {count} pools: {entry['median_s']:.3f} s", file=sys.stderr)
    out["check_all"] = wall([*cli, "check", "--all"], repeat)
    return out


def verdicts(m: dict) -> list[dict]:
    floor = m["floors"]["import pulumi, pulumi_aws"]["median_s"]
    counts = {n: e["resources"] for n, e in m["nodes"].items()}
    n8, n2048 = m["nodes"][8], m["nodes"][2048]
    worst = max(m["stacks"].items(), key=lambda kv: kv[1]["median_s"])
    worst_sdk = max(m["stacks"].items(), key=lambda kv: kv[1]["median_s"] / kv[1]["sdk_floor"]["median_s"])
    return [
        {"target": "resource count independent of node count",
         "value": ", ".join(f"{n}: {c}" for n, c in counts.items()), "pass": len(set(counts.values())) == 1},
        {"target": "2048-node plan <= 1.25x the 8-node plan (fresh process)",
         "value": f"{n2048['median_s'] / n8['median_s']:.2f}x", "pass": n2048["median_s"] <= 1.25 * n8["median_s"]},
        {"target": "2048-node plan <= 1.25x the 8-node plan (in-process, program only)",
         "value": f"{n2048['in_process']['median_s'] / n8['in_process']['median_s']:.2f}x",
         "pass": n2048["in_process"]["median_s"] <= 1.25 * n8["in_process"]["median_s"]},
        {"target": "every example stack plans within 3x the import floor",
         "value": f"slowest {worst[0]}: {worst[1]['median_s'] / floor:.2f}x", "pass": worst[1]["median_s"] <= 3 * floor},
        {"target": "every example stack plans within 3x its SDK floor",
         "value": f"highest {worst_sdk[0]}: {worst_sdk[1]['median_s'] / worst_sdk[1]['sdk_floor']['median_s']:.2f}x",
         "pass": all(e["median_s"] <= 3 * e["sdk_floor"]["median_s"] for e in m["stacks"].values())},
    ]


def markdown(m: dict, meta: dict) -> str:
    floor = m["floors"]["import pulumi, pulumi_aws"]["median_s"]
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    lines = [
        "# Plan-time scaling",
        "",
        f"`bench/plan_scaling.py`, {meta['date']}, commit {meta['commit']}, Python {meta['python']}, "
        f"{meta['platform']}, {meta['cpus']} CPUs; median of {meta['repeat']} fresh processes per row.",
        "",
        "| what | wall | x import floor |",
        "|---|---|---|",
        f"| `python -c pass` | {ms(m['floors']['python']['median_s'])} | "
        f"{m['floors']['python']['median_s'] / floor:.2f} |",
        f"| import floor: `import pulumi, pulumi_aws` | {ms(floor)} | 1.00 |",
        f"| `aicluster check --all` ({len(m['stacks'])} stacks) | {ms(m['check_all']['median_s'])} | "
        f"{m['check_all']['median_s'] / floor:.2f} |",
        "",
        "| `aicluster plan --stack` | resources | wall | x import floor | SDK floor | x SDK floor | program only |",
        "|---|---|---|---|---|---|---|",
    ]
    for stack, e in m["stacks"].items():
        lines.append(f"| {stack} | {e['resources']} | {ms(e['median_s'])} | {e['median_s'] / floor:.2f} | "
                     f"{ms(e['sdk_floor']['median_s'])} | {e['median_s'] / e['sdk_floor']['median_s']:.2f} | "
                     f"{ms(e['in_process']['median_s'])} |")
    n8 = m["nodes"][8]
    lines += ["", f"| {BASE_STACK}, pools[0].max_nodes | resources | wall | x 8 nodes | program only | x 8 nodes |",
              "|---|---|---|---|---|---|"]
    for nodes, e in m["nodes"].items():
        lines.append(f"| {nodes} | {e['resources']} | {ms(e['median_s'])} | {e['median_s'] / n8['median_s']:.2f} | "
                     f"{ms(e['in_process']['median_s'])} | "
                     f"{e['in_process']['median_s'] / n8['in_process']['median_s']:.2f} |")
    p1 = m["pools"][1]
    lines += ["", f"| {BASE_STACK}, pools | resources | wall | x 1 pool | program only | x 1 pool |",
              "|---|---|---|---|---|---|"]
    for count, e in m["pools"].items():
        lines.append(f"| {count} | {e['resources']} | {ms(e['median_s'])} | {e['median_s'] / p1['median_s']:.2f} | "
                     f"{ms(e['in_process']['median_s'])} | "
                     f"{e['in_process']['median_s'] / p1['in_process']['median_s']:.2f} |")
    lines += ["", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {v['target']} | {v['value']} | {'PASS' if v['pass'] else 'MISS'} |" for v in m["verdicts"]]
    lines += ["", "SDK floor: `import pulumi` plus every provider class the stack's resources are made of, in a "
              "fresh process with the cyclic garbage collector off as in `aicluster` (pulumi_aws and pulumi_gcp "
              "load a module's classes on first use, so the import floor holds none of them). Program only: "
              "`plan_stack()` in a warm process: spec, design, the program under mocks, rendered files.", ""]
    return "\n".join(lines)


def run_meta(repeat: int, **more) -> dict:
    """What every benchmark result records of its run: date, commit (`git describe --always
    --dirty`, so a measurement of uncommitted code says so), Python, platform, CPUs, repeats."""
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return {"date": datetime.date.today().isoformat(), "commit": commit, "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}", "cpus": os.cpu_count(), "repeat": repeat,
            **more}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per measurement (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    meta = run_meta(args.repeat)
    print(f"measuring ({args.repeat} runs each) ...", file=sys.stderr)
    m = measure(args.repeat)
    m["verdicts"] = verdicts(m)
    m["meta"] = meta
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan_scaling.json").write_text(json.dumps(m, indent=2, sort_keys=True, default=str) + "\n")
    (args.out / "plan_scaling.md").write_text(markdown(m, meta))
    print(markdown(m, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
