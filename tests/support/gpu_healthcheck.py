"""The GPU health check's test node (tests/scripts/test_gpu_healthcheck.py): stub nvidia-smi, fi_info,
journalctl and scontrol in a temp dir, and a runner for aicluster-gpu-healthcheck. What the stubs print:
that module's docstring. Also used by the NVLink-domain (IMEX) tests (tests/support/imex.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "components" / "aicluster" / "node" / "bin" / "aicluster-gpu-healthcheck"

H100 = "NVIDIA H100 80GB HBM3"
# PCI bus ids of the 8 GPUs of a p5.48xlarge.
P5_BUS_IDS = ["00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", "00000000:86:00.0",
              "00000000:97:00.0", "00000000:A8:00.0", "00000000:B9:00.0", "00000000:CA:00.0"]

# Field names as `nvidia-smi --help-query-gpu` / `--help-query-remapped-rows` spell them.
GPU_FIELDS = {
    "index", "name", "uuid", "serial", "pci.bus_id", "driver_version", "persistence_mode",
    "ecc.mode.current", "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.pending", "memory.total", "temperature.gpu", "fabric.state", "fabric.status",
}
REMAP_FIELDS = {
    "gpu_bus_id", "gpu_uuid", "gpu_name", "remapped_rows.correctable",
    "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure",
}

NVIDIA_SMI_STUB = r'''#!{python}
"""Stub nvidia-smi: answers --query-gpu / --query-remapped-rows from gpus.json."""
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "nvidia-smi.calls"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
conf = json.load(open(os.path.join(here, "gpus.json")))
if sys.argv[1:2] == ["nvlink"]:
    if sys.argv[2:] != ["--status"] or conf.get("nvlink_rc"):
        print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
        sys.exit(conf.get("nvlink_rc") or 2)
    for i, gpu in enumerate(conf["gpus"]):
        print("GPU %d: %s (UUID: GPU-%08x-1111-2222-3333-444455556666)" % (i, gpu["name"], i))
        for n in range(gpu.get("links", 18)):
            up = n < gpu.get("links", 18) - gpu.get("links_down", 0)
            print("\t Link %d: %s" % (n, "26.562 GB/s" if up else "<inactive>"))
    sys.exit(0)
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
if args.get("--format") != "csv,noheader":
    print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    sys.exit(2)
if "--query-gpu" in args:
    fields, valid, rows, rc = args["--query-gpu"].split(","), set(conf["gpu_fields"]), conf["gpus"], conf["gpu_rc"]
elif "--query-remapped-rows" in args:
    fields, valid, rows, rc = args["--query-remapped-rows"].split(","), set(conf["remap_fields"]), conf["gpus"], conf["remap_rc"]
else:
    print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    sys.exit(2)
for f in fields:
    if f not in valid:
        print('Field "%s" is not a valid field to query.' % f)
        print()
        sys.exit(2)
if rc:
    print(conf.get("error", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."))
    sys.exit(rc)
for i, gpu in enumerate(rows):
    values = dict(index=str(i), name=gpu["name"], uuid="GPU-%08x-1111-2222-3333-444455556666" % i,
                  serial="165432100%04d" % i, driver_version="550.127.05", persistence_mode="Enabled",
                  memory_total="81559 MiB", temperature_gpu="31")
    values["pci.bus_id"] = values["gpu_bus_id"] = gpu["bus"]
    values["gpu_uuid"], values["gpu_name"] = values["uuid"], values["name"]
    values["ecc.mode.current"] = "Disabled" if gpu["ecc"] == "[N/A]" else "Enabled"
    values["ecc.errors.uncorrected.volatile.total"] = gpu["ecc"]
    for f in ("ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
              "remapped_rows.correctable", "remapped_rows.uncorrectable"):
        values[f] = "0"
    values["retired_pages.pending"] = "No"
    values["remapped_rows.pending"] = gpu["pending"]
    values["remapped_rows.failure"] = gpu["failure"]
    values.update(gpu.get("fields", {}))
    print(", ".join(values.get(f, values.get(f.replace(".", "_"), "[N/A]")) for f in fields))
'''

FI_INFO_STUB = r'''#!/bin/bash
# Stub fi_info: prints the blocks in fi_info.out for `-p efa -t FI_EP_RDM` (bash builtins only).
here=${0%/*}
echo "$*" >> "$here/fi_info.calls"
if [ "$*" != "-p efa -t FI_EP_RDM" ]; then
    echo "stub fi_info: unexpected arguments: $*" >&2
    exit 2
fi
if [ ! -s "$here/fi_info.out" ]; then
    echo "fi_getinfo: -61 (No data available)"
    exit 1
fi
printf '%s\n' "$(<"$here/fi_info.out")"
'''


SCONTROL_STUB = r'''#!/bin/bash
# Stub scontrol: records its arguments; `-o show node X` prints scontrol.node (or an idle node).
here=${0%/*}
printf '%s\n' "$*" >> "$here/scontrol.calls"
if [ "$1 $2 $3" = "-o show node" ]; then
    if [ -s "$here/scontrol.node" ]; then printf '%s\n' "$(<"$here/scontrol.node")"
    else echo "NodeName=$4 Arch=x86_64 State=IDLE ThreadsPerCore=2"; fi
fi
rc=0
[ -e "$here/scontrol.rc" ] && rc=$(<"$here/scontrol.rc")
exit "$rc"
'''

JOURNALCTL_STUB = r'''#!/bin/bash
# Stub journalctl: the kernel log since boot from kernel.log.
here=${0%/*}
echo "$*" >> "$here/journalctl.calls"
[ "$*" = "-k -b 0 --no-pager -o cat" ] || { echo "stub journalctl: unexpected arguments: $*" >&2; exit 2; }
[ -e "$here/kernel.log" ] && printf '%s\n' "$(<"$here/kernel.log")"
exit 0
'''

# Kernel log lines as the NVIDIA driver writes them.
BOOT_LOG = ("[    4.1] nvidia: loading out-of-tree module taints kernel.\n"
            "[    5.2] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05\n")


def xid_line(bus: str, xid: int, text: str = "GPU has fallen off the bus.") -> str:
    return f"[ 8123.4] NVRM: Xid (PCI:{bus[4:-2]}): {xid}, pid=4242, name=python3, {text}\n"


def efa_blocks(domains: list[str]) -> str:
    """fi_info -p efa -t FI_EP_RDM output, one block per domain."""
    return "".join(
        f"provider: efa\n    fabric: efa\n    domain: {d}\n    version: 120.10\n"
        f"    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n" for d in domains)


def p5_domains(n: int = 32) -> list[str]:
    return [f"rdmap{bus}s0-rdm" for bus in range(79, 79 + n)]


def gpu(i: int, ecc: str = "0", pending: str = "0", failure: str = "0", name: str = H100) -> dict:
    return {"bus": P5_BUS_IDS[i % 8], "ecc": ecc, "pending": pending, "failure": failure, "name": name}


class Node:
    """A temp dir holding stub tools, an env file, and a runner for the script."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        timeout = shutil.which("timeout")
        assert timeout, "coreutils timeout is required to run the health check"
        (self.bin / "timeout").symlink_to(timeout)
        self.env_file = tmp_path / "node.env"
        self.write_env("AICLUSTER_GPUS=8\nAICLUSTER_FABRIC_DEVICES=32\n")

    def write_env(self, text: str) -> None:
        self.env_file.write_text(text)

    def _stub(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def nvidia_smi(self, gpus: list[dict], gpu_rc: int = 0, remap_rc: int = 0, error: str | None = None,
                   remap_fields: set[str] = REMAP_FIELDS) -> None:
        conf = {"gpus": gpus, "gpu_rc": gpu_rc, "remap_rc": remap_rc, "gpu_fields": sorted(GPU_FIELDS),
                "remap_fields": sorted(remap_fields)}
        if error:
            conf["error"] = error
        (self.bin / "gpus.json").write_text(json.dumps(conf))
        self._stub("nvidia-smi", NVIDIA_SMI_STUB.replace("{python}", sys.executable))

    def hanging_nvidia_smi(self) -> None:
        self._stub("nvidia-smi", f"#!/bin/bash\n{shutil.which('sleep')} 60\n")

    def fi_info(self, domains: list[str]) -> None:
        (self.bin / "fi_info.out").write_text(efa_blocks(domains))
        self._stub("fi_info", FI_INFO_STUB)

    def scontrol(self, node_line: str | None = None, rc: int = 0) -> None:
        if node_line:
            (self.bin / "scontrol.node").write_text(node_line)
        (self.bin / "scontrol.rc").write_text(str(rc))
        self._stub("scontrol", SCONTROL_STUB)

    def kernel_log(self, text: str = BOOT_LOG) -> None:
        (self.bin / "kernel.log").write_text(text)
        self._stub("journalctl", JOURNALCTL_STUB)

    def recording_timeout(self) -> None:
        """`timeout` that logs its arguments, then runs the real one."""
        (self.bin / "timeout").unlink()
        self._stub("timeout", f'#!/bin/bash\necho "$*" >> "${{0%/*}}/timeout.calls"\n'
                              f'exec {shutil.which("timeout")} "$@"\n')

    def dcgmi(self, rc: int = 0, output: str = "Successfully ran diagnostic for group.\n") -> None:
        (self.bin / "dcgmi.out").write_text(output)
        self._stub("dcgmi", f'#!/bin/bash\necho "$*" >> "${{0%/*}}/dcgmi.calls"\n'
                            f'printf "%s\\n" "$(<"${{0%/*}}/dcgmi.out")"\nexit {rc}\n')

    def healthy(self, gpus: int = 8, efa: int = 32) -> "Node":
        self.nvidia_smi([gpu(i) for i in range(gpus)])
        self.fi_info(p5_domains(efa))
        self.kernel_log()
        self.scontrol()
        return self

    def calls(self, tool: str) -> list[str]:
        log = self.bin / f"{tool}.calls"
        return log.read_text().splitlines() if log.exists() else []

    def run(self, extra_env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
        env = {"PATH": str(self.bin), "AICLUSTER_NODE_ENV": str(self.env_file)}
        env.update(extra_env or {})
        return subprocess.run([str(SCRIPT)], env=env, cwd=self.tmp, capture_output=True, text=True,
                              timeout=timeout)


def check_lines(stdout: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stdout.splitlines())
