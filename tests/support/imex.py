"""A GB200 node of an 18-node NVLink domain for the GPU health check's IMEX tests
(tests/scripts/test_gpu_healthcheck_imex.py, whose docstring says what the stubs print): stub
nvidia-imex-ctl, systemctl and hostname on top of tests/support/gpu_healthcheck.py's node, and
`nvidia-imex-ctl -N` output of a domain."""
from __future__ import annotations

import shutil

from tests.support.gpu_healthcheck import Node, check_lines, gpu

GB200 = "NVIDIA GB200"
DOMAIN = 18
ADDRS = [f"10.0.{n // 250}.{10 + n % 250}" for n in range(DOMAIN)]
LEGEND = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
!V! - Version mismatch, communication disabled.
!M! - Node map mismatch, communication disabled.
C - Connected - Ready for operation
"""

IMEX_CTL_STUB = r'''#!/bin/bash
# Stub nvidia-imex-ctl: -q prints imex-q.out, -N prints imex-N.out.
here=${0%/*}
echo "$*" >> "$here/nvidia-imex-ctl.calls"
case "$*" in
    -q) f=imex-q.out ;;
    -N) f=imex-N.out ;;
    *) echo "Usage: nvidia-imex-ctl [-i <IP> <PORT>|-u <path>|-c <config>] <-n|-N|-q|-s|-d|-m>" >&2; exit 1 ;;
esac
printf '%s\n' "$(<"$here/$f")"
rc=0
[ -e "$here/imex.rc" ] && rc=$(<"$here/imex.rc")
exit "$rc"
'''

SYSTEMCTL_STUB = r'''#!/bin/bash
# Stub systemctl: `is-active nvidia-imex` prints the unit's state; exit 0 only when active.
here=${0%/*}
echo "$*" >> "$here/systemctl.calls"
[ "$*" = "is-active nvidia-imex" ] || { echo "stub systemctl: unexpected arguments: $*" >&2; exit 2; }
state=$(<"$here/imex.state")
echo "$state"
[ "$state" = active ]
'''


def domain_status(states: list[str] | None = None, links: dict[tuple[int, int], str] | None = None,
                  domain: str = "UP", nodes: int = DOMAIN) -> str:
    """`nvidia-imex-ctl -N` of a domain: each node's state (READY by default) and each link
    (from, to) that is not C."""
    states = states or ["READY"] * nodes
    links = links or {}
    out = [LEGEND, "11/28/2026 14:05:09.123", "Nodes:"]
    out += [f"Node #{i:<3} - {ADDRS[i]:<15} - {s:<20} - Version: 570.172" for i, s in enumerate(states)]
    out.append("")
    out.append(" Nodes From\\To  " + "".join(f"{i:<4}" for i in range(len(states))).rstrip())
    for i in range(len(states)):
        out.append(f"{i:>7}        " + "".join(f"{links.get((i, j), 'C'):<4}" for j in range(len(states))).rstrip())
    out += ["", f"Domain State: {domain}"]
    return "\n".join(out) + "\n"


def down(node: int, cell: str = "D", nodes: int = DOMAIN) -> dict[tuple[int, int], str]:
    """Every link to and from `node` in state `cell`."""
    return {**{(node, j): cell for j in range(nodes) if j != node}, **{(j, node): cell for j in range(nodes) if j != node}}


class Nvl72Node(Node):
    """A GB200 node (4 GPUs, 2 EFA devices counted by the test's env) of an 18-node NVLink domain."""

    def __init__(self, tmp_path, index: int = 3):
        super().__init__(tmp_path)
        setsid = shutil.which("setsid")
        assert setsid, "setsid (util-linux) is required to run the health check"
        (self.bin / "setsid").symlink_to(setsid)
        self.index = index
        self.write_env(f"AICLUSTER_GPUS=4\nAICLUSTER_FABRIC_DEVICES=2\nAICLUSTER_NVLINK_DOMAIN_NODES={DOMAIN}\n")
        self.gpus()
        self.fi_info([f"rdmap{n}s0-rdm" for n in range(2)])
        self.kernel_log()
        self.scontrol()
        self._stub("hostname", f'#!/bin/bash\n[ "$*" = "-I" ] && echo "{ADDRS[index]} 172.17.0.1 "\n')
        self.imex()

    def gpus(self, state: str = "Completed", status: str = "Success", bad: int | None = None) -> None:
        rows = []
        for i in range(4):
            g = gpu(i, name=GB200)
            ok = bad is None or i != bad
            g["fields"] = {"fabric.state": state if not ok else "Completed",
                           "fabric.status": status if not ok else "Success"}
            rows.append(g)
        self.nvidia_smi(rows)

    def imex(self, q: str = "READY", n: str | None = None, service: str | None = "active", rc: int = 0) -> None:
        (self.bin / "imex-q.out").write_text(q + "\n")
        (self.bin / "imex-N.out").write_text(domain_status() if n is None else n)
        (self.bin / "imex.rc").write_text(str(rc))
        self._stub("nvidia-imex-ctl", IMEX_CTL_STUB)
        if service is None:
            (self.bin / "systemctl").unlink(missing_ok=True)
        else:
            (self.bin / "imex.state").write_text(service)
            self._stub("systemctl", SYSTEMCTL_STUB)

    def run(self, extra_env: dict | None = None, timeout: float = 30):
        # aicluster-imex-config is the stub below or none, never the one beside the script.
        return super().run({"AICLUSTER_IMEX_CONFIG": str(self.bin / "aicluster-imex-config"), **(extra_env or {})},
                           timeout)

    def imex_config(self) -> None:
        """A stub aicluster-imex-config that records the node it ran for."""
        self._stub("aicluster-imex-config",
                   '#!/bin/bash\necho "node=$SLURMD_NODENAME" >> "${0%/*}/aicluster-imex-config.calls"\n')

    def health(self, node: str = "gpu-3", **env) -> tuple[object, dict]:
        run = self.run({"SLURMD_NODENAME": node, **env})
        return run, check_lines(run.stdout)
