"""The login nodes' design slice: how many, of which type, with which root volume, and their
names. Pure (no Pulumi): spec.slurm.login -> LoginDesign, and the plan's lines about them.

Login nodes are where users live: they ssh (or SSM / IAP) in, edit, build, `sbatch` and `srun`.
They run no slurmd and are not Slurm nodes (slurm.conf never names them); they join the cluster
through sackd in configless mode. Nothing here depends on pools, node counts or filesystems, so a
routine spec edit leaves every login node's inputs as they were.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aicluster.spec.login import DEFAULT_LOGIN_TYPE, LoginSpec


@dataclass(frozen=True)
class LoginDesign:
    """The login nodes of a cluster."""
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


# How users reach a login node without ssh from network.ssh_ingress_cidrs (aws/login.py attaches
# AmazonSSMManagedInstanceCore; gcp/login.py opens 22 to IAP's range only).
LOGIN_ACCESS = {"aws": "SSM Session Manager", "gcp": "IAP TCP forwarding (gcloud compute ssh --tunnel-through-iap)"}
SLURM_ROLE = "Slurm client + sackd (configless from slurmctld), no slurmd"


def login_facts(cluster: str, cloud: str, login: LoginDesign | None) -> dict[str, Any] | None:
    """What the plan says about the login nodes, in `aicluster plan --format json` and (through
    login_plan_lines) in text and markdown; None without Slurm. What aws/login.py and gcp/login.py
    build: an encrypted root, no public IP (no access config on gcp), not stateful. They mount
    every filesystem of the cluster (the nodes' mount script), which the plan adds: the storage is
    not the login design's."""
    if login is None:
        return None
    return {"count": login.count, "instance_type": login.instance_type, "hostnames": list(login.names(cluster)),
            "root_volume_gib": login.root_volume_gib, "root_volume_encrypted": True, "public_ip": False,
            "stateful": False, "access": [LOGIN_ACCESS[cloud], "ssh from network.ssh_ingress_cidrs"],
            "slurm": SLURM_ROLE}


def login_plan_lines(cluster: str, cloud: str, login: LoginDesign | None) -> list[str]:
    """The plan's "Login nodes" section (plan_report.py prints it); none without Slurm."""
    facts = login_facts(cluster, cloud, login)
    if facts is None:
        return []
    if facts["count"] == 0:
        return ["", "Login nodes", "  none (slurm.login.count 0): users reach Slurm from the head node only"]
    return ["", "Login nodes",
            f"  {facts['count']} x {facts['instance_type']}: {', '.join(facts['hostnames'])}; "
            f"{facts['root_volume_gib']} GiB {'encrypted' if facts['root_volume_encrypted'] else 'unencrypted'} root, "
            f"{'public IP' if facts['public_ip'] else 'private (no public IP)'}, "
            f"{'stateful' if facts['stateful'] else 'not stateful'}",
            f"  log in with {', or '.join(facts['access'])}",
            f"  {facts['slurm']}; every filesystem mounted"]
