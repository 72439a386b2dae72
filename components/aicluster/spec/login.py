"""`slurm.login`: the login nodes of a Slurm cluster, where users log in, build and submit jobs
(never on the controller). Shape and meaning both live here; spec.py only hangs the section under
`slurm` and calls `login_problems`, so the section has one owner.
"""
from __future__ import annotations

from typing import Annotated, Sequence

from pydantic import Field

from aicluster.errors import Problem, close_match
from aicluster.spec.workload import SpecModel

# Login nodes when the spec names no type: 8 vCPU / 32 GiB on both clouds, the head node's size.
# Users compile, build Python environments and import containers (enroot import unpacks a
# multi-GiB image on the node it runs on) there; the 4 vCPU / 16 GiB types run out of memory on a
# PyTorch image import with two users at it. Both are catalog controller types with sources
# (catalog/aws.yaml, catalog/gcp.yaml controller_types).
DEFAULT_LOGIN_TYPE = {"aws": "m7i.2xlarge", "gcp": "n2-standard-8"}
MAX_LOGIN_NODES = 10


class LoginSpec(SpecModel):
    count: Annotated[int, Field(strict=True, ge=0, le=MAX_LOGIN_NODES)] = Field(
        1, description="Login nodes: where users log in, build and submit jobs (never on the head node). "
                       "Private: SSH only from network.ssh_ingress_cidrs, otherwise SSM Session Manager "
                       "on aws, IAP on gcp. 0: none.")
    instance_type: Annotated[str, Field(strict=True, min_length=1, max_length=256)] | None = Field(
        None, description="A controller type from the catalog (`aicluster catalog`). Default: "
                          "m7i.2xlarge on aws, n2-standard-8 on gcp (8 vCPU, 32 GiB: room to build "
                          "environments and import containers).")
    root_volume_gib: Annotated[int, Field(strict=True, ge=50, le=16_384)] = Field(
        100, description="Encrypted root volume (a boot disk on gcp); user files belong on /home.")


def login_problems(cloud: str, login: LoginSpec, controllers: Sequence[str], at: str = "slurm.login") -> list[Problem]:
    """The type must be one of the cloud's controller types (CPU machines with sourced facts)."""
    chosen = login.instance_type
    if chosen is None or chosen in controllers:
        return []
    return [Problem(f"{at}.instance_type", chosen, f"a {cloud} controller type: {', '.join(controllers)}",
                    close_match(chosen, list(controllers)))]
