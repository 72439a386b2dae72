"""What `aicluster preflight` reports (commands/preflight.py): one `Check` per thing checked and
the `PreflightReport` of a stack. Its own module so the cloud modules (preflight_aws,
preflight_gcp) and the command share it without importing each other, with `controller_nodes`,
the CPU machines beside the pools that each of them checks."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Status = Literal["ok", "failed", "skipped"]
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


@dataclass(frozen=True)
class Check:
    """One preflight check: what was checked, how it went, and what to do about a failure."""
    name: str                  # "zone", "offering pools[0]", "quota L-417A185B", ...
    status: Status
    detail: str
    remedy: str = ""           # failed: what to change or request, and where; skipped: how to check by hand
    live: bool = False         # asked the cloud (True) or read the catalog (False)
    path: str = ""             # the spec path it concerns, where there is one


@dataclass
class PreflightReport:
    """Every check of one stack, in the order they ran."""
    stack: str
    cloud: str
    region: str
    zone: str
    live: bool                             # whether the live checks ran
    live_reason: str                       # why they did or did not
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.status == "failed" for c in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK

    def count(self, status: Status) -> int:
        return sum(1 for c in self.checks if c.status == status)

    def to_json(self) -> dict:
        return {"stack": self.stack, "cloud": self.cloud, "region": self.region, "zone": self.zone,
                "live": self.live, "live_reason": self.live_reason, "failed": self.failed,
                "summary": {s: self.count(s) for s in ("ok", "failed", "skipped")},
                "checks": [asdict(c) for c in self.checks]}


def controller_nodes(spec) -> list[tuple[str, str, str, int]]:
    """(label, spec path, instance type, count) of the CPU machines beside the pools: the Slurm
    head and login nodes, or the Kubernetes system nodes; defaults as the design picks them."""
    from aicluster.design.cluster import DEFAULT_HEAD_TYPE
    from aicluster.design.kubernetes import DEFAULT_SYSTEM_TYPE
    from aicluster.spec.login import DEFAULT_LOGIN_TYPE

    if spec.scheduler == "kubernetes":
        system = spec.kubernetes.system_nodes
        return [("system nodes", "kubernetes.system_nodes.instance_type",
                 system.instance_type or DEFAULT_SYSTEM_TYPE[spec.cloud], system.count)]
    nodes = [("head", "slurm.head_node.instance_type",
              spec.slurm.head_node.instance_type or DEFAULT_HEAD_TYPE[spec.cloud], 1)]
    login = spec.slurm.login
    if login.count:
        nodes.append(("login", "slurm.login.instance_type", login.instance_type or DEFAULT_LOGIN_TYPE[spec.cloud],
                      login.count))
    return nodes
