"""The node-local programs of Slurm compute (and login) nodes: aicluster-scratch (local NVMe as
RAID0 at /scratch) and aicluster-containers (enroot and pyxis at the catalog's pins, enroot's
paths on /scratch, the host's fabric libraries in every container). Both run in the node
bootstrap before slurmd starts. AWS nodes fetch them from the configuration bucket
(aws/slurm.py node_program_files), GCP nodes carry them in their metadata (cloud-init/compute).

Also the plan's /scratch line for a pool (plan_report.py).
"""
from __future__ import annotations

from aicluster.catalog import load_catalog
from aicluster.catalog.node_local import SCRATCH, containers, local_nvme
from aicluster.render import render, static

SCRATCH_PROGRAM = "aicluster-scratch"
CONTAINERS_PROGRAM = "aicluster-containers"


def node_local_programs() -> dict[str, str]:
    """{program name: text} of the programs a node installs in its bin directory."""
    return {SCRATCH_PROGRAM: static("scripts/aicluster-scratch"),
            CONTAINERS_PROGRAM: render("scripts/aicluster-containers.sh.j2", c=containers(), scratch=SCRATCH)}


def local_nvme_devices(instance_type: str) -> int:
    """How many local NVMe devices a node of the type must find (node.env
    AICLUSTER_LOCAL_NVME_DEVICES; aicluster-scratch fails the node with fewer): 0 where unknown."""
    nvme = local_nvme(instance_type)
    return nvme.devices if nvme else 0


def scratch_summary(instance_type: str) -> str:
    """What the plan says about a pool's /scratch: 'RAID0 of 8 x 3800 GB local NVMe = 30400 GB'
    (GCP Local SSD devices are 375 GiB: their sizes are GiB)."""
    nvme = local_nvme(instance_type)
    if nvme is None:
        itype = load_catalog().find(instance_type)
        if itype is not None and itype.local_nvme_gb:
            return f"local NVMe = {itype.local_nvme_gb} GB"
        return "none (no local NVMe: enroot uses /var/tmp on the boot disk)"
    how = "RAID0 of " if nvme.devices > 1 else ""
    return f"{how}{nvme.devices} x {nvme.device_gb} GB local NVMe = {nvme.total_gb} GB"


def containers_summary() -> str:
    c = containers()
    return f"enroot {c.enroot.version} + pyxis {c.pyxis.version} (srun --container-image)"


def pool_plan_lines(design, pool) -> list[str]:
    """The plan's lines for one pool of a Slurm cluster: its /scratch and its containers (none for
    Kubernetes clusters, TPU slices and pools without accelerators of their own)."""
    if design.slurm is None or getattr(pool, "tpu", None):
        return []
    return [f"    {SCRATCH} {scratch_summary(pool.instance.name)}; containers {containers_summary()}"]
