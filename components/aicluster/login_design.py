"""The login nodes' design slice: how many, of which type, with which root volume, and their
names. Pure (no Pulumi): spec.slurm.login -> LoginDesign, and the plan's lines about them.

Login nodes are where users live: they ssh (or SSM / IAP) in, edit, build, `sbatch` and `srun`.
They run no slurmd and are not Slurm nodes (slurm.conf never names them); they join the cluster
through sackd in configless mode. Nothing here depends on pools, node counts or filesystems, so a
routine spec edit leaves every login node's inputs as they were.
"""
from __future__ import annotations

from dataclasses import dataclass

from .login_spec import DEFAULT_LOGIN_TYPE, LoginSpec


@dataclass(frozen=True)
class LoginDesign:
    count: int
    instance_type: str
    root_volume_gib: int

    def names(self, cluster: str) -> tuple[str, ...]:
        """Hostnames and instance names: <cluster>-login-<n>, from 1 (never a Slurm node name:
        those are <pool>-<n>, and a pool may not be called <cluster>-login)."""
        return tuple(f"{cluster}-login-{i}" for i in range(1, self.count + 1))


def design_login(cloud: str, login: LoginSpec) -> LoginDesign:
    return LoginDesign(count=login.count, instance_type=login.instance_type or DEFAULT_LOGIN_TYPE[cloud],
                       root_volume_gib=login.root_volume_gib)


def login_plan_lines(cluster: str, cloud: str, login: LoginDesign | None) -> list[str]:
    """The plan's "Login nodes" section (plan_report.py prints it); none without Slurm."""
    if login is None:
        return []
    if login.count == 0:
        return ["", "Login nodes", "  none (slurm.login.count 0): users reach Slurm from the head node only"]
    access = "SSM Session Manager" if cloud == "aws" else "IAP TCP forwarding (gcloud compute ssh --tunnel-through-iap)"
    return ["", "Login nodes",
            f"  {login.count} x {login.instance_type}: {', '.join(login.names(cluster))}; "
            f"{login.root_volume_gib} GiB encrypted root, private (no public IP), not stateful",
            f"  log in with {access}, or ssh from network.ssh_ingress_cidrs",
            "  Slurm client + sackd (configless from slurmctld), no slurmd; every filesystem mounted"]
