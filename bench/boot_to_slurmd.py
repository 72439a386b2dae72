#!/usr/bin/env python3
"""How long an AWS compute node takes from its bootstrap's start to `systemctl restart slurmd`, on a
baked image (issue 26: the boot installs nothing) and on a stock image that installs at boot (the
fallback: Slurm 24.11.5 built from SchedMD's source archive), side by side in one run.

    .venv/bin/python bench/boot_to_slurmd.py [--url URL] [--jobs N] [--out bench/results]

Both paths run the real aicluster-node-bootstrap (components/aicluster/node/bin) in the tests'
scratch tree (tests/support/node_bootstrap.py: AICLUSTER_ROOT, moto's EC2 for the instance's tags,
a loopback IMDS), with the real aicluster-node-install and aicluster-install-slurm from the node
archive. Fakes only for what needs the cloud or a booted machine: systemctl, install -o, munge,
hostnamectl (recorders), the munge key (aicluster-secret). The install path has no slurmd and no
apt-get fake: it runs the real apt-get (the build dependencies, as root on this Debian machine),
downloads the archive from `--url` (Debian's copy by default; checked against the catalog's
SHA-256 and size), runs configure, make -j$(nproc) and make install into the scratch tree, and the
bootstrap then checks that slurmd's `-V` says 24.11.5. Steps are timed from the bootstrap's own
xtrace (each `STEP=` line as it arrives) and from aicluster-install-slurm's step lines.

Not measured here (they need the cloud or a GPU): the instance's launch and cloud-init, the mount,
enroot and pyxis (aicluster-containers; their installers skip the tree without them), monitoring.
A benchmark, not a test: nothing here asserts a time. Results: bench/results/boot_to_slurmd.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from moto.server import ThreadedMotoServer  # noqa: E402

from aicluster.catalog.slurm_release import slurm_release  # noqa: E402
from aicluster.node.install_slurm import REQUIRED_PLUGINS  # noqa: E402
from aicluster.render.node_image import MANIFEST, contents_key  # noqa: E402
from plan_scaling import run_meta  # noqa: E402
from tests.support import free_port, node_programs  # noqa: E402
from tests.support.node_bootstrap import AWS_SCRIPT, Metadata, Node, setup_aws_node  # noqa: E402

STEP = re.compile(r"^\++ STEP=(\w+)$")
INSTALL_STEP = re.compile(r"^aicluster-install-slurm: step (.+): ([0-9.]+) s")
PROGRAMS = ["aicluster-node-install", "aicluster-install-slurm"]


def aws_node(tmp: Path, meta: Metadata, endpoint: str) -> Node:
    """A node in the scratch tree as tests/support/node_bootstrap.py's `aws` fixture makes one."""
    node = Node(tmp, meta)
    setup_aws_node(node, meta, endpoint)
    node_programs.install(node.programs, PROGRAMS, python=sys.executable)
    return node


def timed_boot(node: Node, env: dict | None = None, echo: bool = False) -> dict:
    """Run the bootstrap under bash -x; each step's seconds (from its STEP= line to the next)."""
    start = time.monotonic()
    marks: list[tuple[str, float]] = [("start", 0.0)]
    proc = subprocess.Popen(["bash", "-x", str(AWS_SCRIPT)], env={**node.env, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    tail: list[str] = []
    for line in proc.stderr:
        line = line.rstrip("\n")
        m = STEP.match(line)
        if m:
            marks.append((m.group(1), time.monotonic() - start))
            if echo:
                print(f"  {marks[-1][1]:8.1f} s  step {m.group(1)}", file=sys.stderr, flush=True)
        elif not line.startswith("+"):
            tail = (tail + [line])[-5:]
    rc = proc.wait()
    total = time.monotonic() - start
    marks.append(("end", total))
    steps: dict[str, float] = {}
    for (name, at), (_, until) in zip(marks, marks[1:]):
        steps[name] = round(steps.get(name, 0.0) + until - at, 3)
    return {"rc": rc, "total_s": round(total, 3), "steps_s": steps, "slurmd_started": node.slurmd_started(),
            "last_lines": tail}


def baked(tmp: Path, meta: Metadata, endpoint: str) -> dict:
    node = aws_node(tmp, meta, endpoint)
    key = contents_key("aws")
    env = node.root / "etc/aicluster/node.env"
    env.write_text(env.read_text() + f"AICLUSTER_IMAGE_CONTENTS={key}\n")
    manifest = node.root / MANIFEST.lstrip("/")
    manifest.write_text(json.dumps({"contents": key, "cloud": "aws", "built_at": "bench",
                                    "found": {"slurmd": f"slurm {slurm_release().version}"}}))
    for name in ("apt-get", "curl-download", "make", "gcc"):      # would record an install; none expected
        node._stub(name, f'#!/bin/bash\necho "{name} $*" >> "${{0%/*}}/calls"\n')
    out = timed_boot(node)
    out["installs"] = [c for c in node.calls() if c.split()[0] in ("apt-get", "make", "gcc")]
    return out


def install(tmp: Path, meta: Metadata, endpoint: str, url: str, jobs: int | None) -> dict:
    node = aws_node(tmp, meta, endpoint)
    r = slurm_release()
    (node.bin / "slurmd").unlink()                 # a stock image: no Slurm
    (node.bin / "apt-get").unlink()                # the real apt-get (build dependencies)
    env = node.root / "etc/aicluster/node.env"
    env.write_text(env.read_text() + f"AICLUSTER_SLURM_URLS={url}\n")     # the last line wins
    usr = node.root / "usr"
    # This machine's own Slurm (Debian's 22.05 for the suite's real daemons) must not be the
    # node's: the system's programs, less slurmd, through a folder of links.
    system = tmp / "system-bin"
    system.mkdir()
    for folder in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for program in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            if program != "slurmd" and not (system / program).exists():
                (system / program).symlink_to(os.path.join(folder, program))
    extra = {"PATH": f"{node.bin}:{usr}/sbin:{usr}/bin:{system}",
             # slurmd from the scratch tree finds its libslurmfull there (its RPATH is /usr/lib/slurm).
             "LD_LIBRARY_PATH": f"{usr}/lib/slurm:{usr}/lib"}
    if jobs:
        wrapper = node.programs / "aicluster-install-slurm"
        wrapper.write_text(wrapper.read_text().replace('"$@"', f'--jobs {jobs} "$@"'))
    out = timed_boot(node, extra, echo=True)
    log = node.root / "var/log/aicluster-install-slurm.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    out["install_slurm_steps_s"] = {m.group(1): float(m.group(2)) for m in map(INSTALL_STEP.match, text.splitlines()) if m}
    out["install_slurm_last_line"] = text.strip().splitlines()[-1] if text.strip() else ""
    slurmd = usr / "sbin/slurmd"
    out["slurmd_V"] = subprocess.run([str(slurmd), "-V"], capture_output=True, text=True,
                                     env={**os.environ, **extra}).stdout.strip() if slurmd.exists() else ""
    out["archive"] = {"url": url, "sha256": r.sha256, "size": r.size}
    plugins = sorted(p.name[:-3] for p in (usr / "lib/slurm").glob("*.so"))
    out["plugins"] = {"count": len(plugins), "required_missing": [p for p in REQUIRED_PLUGINS if p not in plugins]}
    return out


def main(argv=None) -> int:
    r = slurm_release()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=next(u for u in r.urls if "debian.org" in u),
                        help="where the install path downloads the archive (default: Debian's copy)")
    parser.add_argument("--jobs", type=int, help="make -j (default: the CPUs)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        with tempfile.TemporaryDirectory(prefix="boot-baked-") as a, tempfile.TemporaryDirectory(prefix="boot-install-") as b:
            meta = Metadata()
            try:
                print("baked image ...", file=sys.stderr, flush=True)
                baked_run = baked(Path(a), meta, endpoint)
                print(f"  {baked_run['total_s']} s", file=sys.stderr)
                print(f"install at boot (a real build of Slurm {r.version}) ...", file=sys.stderr, flush=True)
                install_run = install(Path(b), Metadata(), endpoint, args.url, args.jobs)
            finally:
                meta.stop()
    finally:
        moto.stop()
    command = ".venv/bin/python bench/boot_to_slurmd.py" + "".join(
        f" {k} {shlex.quote(str(v))}" for k, v in (("--url", args.url), ("--jobs", args.jobs)) if v)
    result = {**run_meta(1, command=command, jobs=args.jobs or os.cpu_count(), slurm_version=r.version,
                         machine=f"{os.cpu_count()} CPUs, {platform_name()}"),
              "baked": baked_run, "install": install_run,
              "speedup": round(install_run["total_s"] / baked_run["total_s"], 1) if baked_run["total_s"] else None}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "boot_to_slurmd.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    (args.out / "boot_to_slurmd.md").write_text(report(result))
    print(report(result))
    return 0 if baked_run["rc"] == 0 and install_run["rc"] == 0 else 1


def platform_name() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as fh:
            return next(ln.split("=", 1)[1].strip().strip('"') for ln in fh if ln.startswith("PRETTY_NAME="))
    except (OSError, StopIteration):
        return "unknown"


def report(res: dict) -> str:
    b, i = res["baked"], res["install"]
    steps = list(dict.fromkeys([*b["steps_s"], *i["steps_s"]]))
    lines = [f"# Boot to slurmd: baked image vs install at boot ({res['date']}, {res['commit']})", "",
             f"`{res['command']}` (as root: it runs apt-get) on {res['machine']}; Slurm {res['slurm_version']}, make -j{res['jobs']}.", "",
             "The real aicluster-node-bootstrap in the scratch tree (AWS; moto's EC2, a loopback IMDS; systemctl, "
             "munge and the munge key faked). Launch, cloud-init, mounts, enroot/pyxis and monitoring are not in it.", "",
             "| step | baked image (s) | install at boot (s) |", "|---|---:|---:|"]
    lines += [f"| {s} | {b['steps_s'].get(s, 0):.2f} | {i['steps_s'].get(s, 0):.2f} |" for s in steps]
    lines += [f"| **total** (exit {b['rc']} / {i['rc']}) | **{b['total_s']:.2f}** | **{i['total_s']:.2f}** |", "",
              f"Installs on the baked path: {b.get('installs') or 'none'}. slurmd started: baked {b['slurmd_started']}, "
              f"install {i['slurmd_started']}; the built slurmd -V: `{i.get('slurmd_V')}`.", "",
              "aicluster-install-slurm's own steps on the install path (its `packages` step above):", "",
              "| install step | s |", "|---|---:|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in i.get("install_slurm_steps_s", {}).items()]
    if "plugins" in i:
        lines += ["", f"Plugins built: {i['plugins']['count']} in /usr/lib/slurm; of the {len(REQUIRED_PLUGINS)} "
                  f"aicluster requires, missing: {', '.join(i['plugins']['required_missing']) or 'none'}."]
    lines += ["", f"Archive: {i['archive']['url']} ({i['archive']['size']} bytes, SHA-256 {i['archive']['sha256']}).",
              f"Last line: {i.get('install_slurm_last_line')}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
