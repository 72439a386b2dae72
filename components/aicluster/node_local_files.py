"""The node-local programs of Slurm compute (and login) nodes: aicluster-scratch (local NVMe as
RAID0 at /scratch) and aicluster-containers (enroot and pyxis at the catalog's pins, enroot's
paths on /scratch, the host's fabric libraries in every container). Both run in the node
bootstrap before slurmd starts. AWS nodes fetch them from the configuration bucket
(aws/slurm.py node_program_files), GCP nodes carry them in their metadata (cloud-init/compute).

Also the plan's /scratch and containers facts for a pool (plan_report.py: text and JSON).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aicluster.catalog import load_catalog
from aicluster.catalog.node_local import SCRATCH, containers, local_nvme
from aicluster.render import render, static
from aicluster.slurm_monitoring import node_programs as monitoring_programs

SCRATCH_PROGRAM = "aicluster-scratch"
CONTAINERS_PROGRAM = "aicluster-containers"
CONTAINER_USAGE = "srun --container-image"    # how a job uses them: pyxis's option


def node_local_programs() -> dict[str, str]:
    """{program name: text} of the programs a node installs in its bin directory: also what watches
    it (aicluster-monitoring and aicluster-node-metrics, slurm_monitoring.py)."""
    return {SCRATCH_PROGRAM: static("scripts/aicluster-scratch"),
            CONTAINERS_PROGRAM: render("scripts/aicluster-containers.sh.j2", c=containers(), scratch=SCRATCH),
            **monitoring_programs()}


def local_nvme_devices(instance_type: str) -> int:
    """How many local NVMe devices a node of the type must find (node.env
    AICLUSTER_LOCAL_NVME_DEVICES; aicluster-scratch fails the node with fewer): 0 where unknown."""
    nvme = local_nvme(instance_type)
    return nvme.devices if nvme else 0


@dataclass(frozen=True)
class Scratch:
    """A Slurm node's /scratch, as the plan shows it in text and JSON: the instance type's local
    NVMe devices assembled as one filesystem (RAID0 when more than one). Sizes are in `unit` (GB,
    or GiB for GCP Local SSD); `devices` and `device_size` are None where the catalog knows only
    the type's total."""

    devices: int | None
    device_size: int | None
    total_size: int
    unit: str
    mount: str = SCRATCH

    @property
    def raid0(self) -> bool:
        return (self.devices or 0) > 1

    def summary(self) -> str:
        if self.devices is None:
            return f"local NVMe = {self.total_size} {self.unit}"
        how = "RAID0 of " if self.raid0 else ""
        return (f"{how}{self.devices} x {self.device_size} {self.unit} local NVMe = "
                f"{self.total_size} {self.unit}")

    def to_json(self) -> dict[str, Any]:
        return {"mount": self.mount, "devices": self.devices, "device_size": self.device_size,
                "total_size": self.total_size, "unit": self.unit, "raid0": self.raid0}


def node_scratch(instance_type: str) -> Scratch | None:
    """The /scratch a node of the type gets (None: no local NVMe, enroot uses the boot disk)."""
    nvme = local_nvme(instance_type)
    if nvme is not None:
        return Scratch(nvme.devices, nvme.device_gb, nvme.total_gb, nvme.unit)
    itype = load_catalog().find(instance_type)
    if itype is not None and itype.local_nvme_gb:
        return Scratch(None, None, itype.local_nvme_gb, "GB")
    return None


def scratch_summary(instance_type: str) -> str:
    """What the plan says about a pool's /scratch: 'RAID0 of 8 x 3800 GB local NVMe = 30400 GB'."""
    scratch = node_scratch(instance_type)
    return scratch.summary() if scratch else "none (no local NVMe: enroot uses /var/tmp on the boot disk)"


def containers_summary() -> str:
    c = containers()
    return f"enroot {c.enroot.version} + pyxis {c.pyxis.version} ({CONTAINER_USAGE})"


def containers_json() -> dict[str, Any]:
    c = containers()
    return {"enroot_version": c.enroot.version, "pyxis_version": c.pyxis.version, "pyxis_commit": c.pyxis.commit,
            "usage": CONTAINER_USAGE}


def runs_node_local(design, pool) -> bool:
    """/scratch and containers are set up by the Slurm node bootstrap: not on Kubernetes clusters,
    nor on TPU slices (no Slurm node bootstrap of their own)."""
    return design.slurm is not None and not getattr(pool, "tpu", None)


def pool_plan_lines(design, pool) -> list[str]:
    """The plan's lines for one pool of a Slurm cluster: its /scratch and its containers."""
    if not runs_node_local(design, pool):
        return []
    return [f"    {SCRATCH} {scratch_summary(pool.instance.name)}; containers {containers_summary()}"]


def pool_node_local_json(design, pool) -> dict[str, Any]:
    """The same facts for `aicluster plan --format json`: {"scratch", "containers"}, each null
    where pool_plan_lines prints nothing (scratch also null on a type without local NVMe)."""
    if not runs_node_local(design, pool):
        return {"scratch": None, "containers": None}
    scratch = node_scratch(pool.instance.name)
    return {"scratch": scratch.to_json() if scratch else None, "containers": containers_json()}
