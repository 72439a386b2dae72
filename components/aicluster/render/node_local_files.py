"""The node-local programs of Slurm compute (and login) nodes: aicluster-scratch (local NVMe as
RAID0 at /scratch) and aicluster-containers (enroot and pyxis at the catalog's pins, enroot's
paths on /scratch, the host's fabric libraries in every container). Both run in the node
bootstrap before slurmd starts. AWS nodes fetch them from the configuration bucket
(aws/slurm.py node_program_files), GCP nodes carry them in their metadata (cloud-init/compute).

pyxis is built once, on the head node (aicluster-pyxis-build, published to the head by
slurm_files.published_files), against the cluster's pinned Slurm, and published with its SHA-256
beside it in the cluster's own bucket under PYXIS_ARTIFACT_PREFIX; the nodes' aicluster-containers
fetches and checks it (aicluster-fetch --artifact). No node clones or compiles anything.

Also the plan's /scratch and containers facts for a pool (plan_report.py: text and JSON).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from aicluster.catalog import load_catalog
from aicluster.catalog.node_local import SCRATCH, Containers, containers, local_nvme
from aicluster.catalog.slurm_release import slurm_release
from aicluster.render.templates import render
from aicluster.render.node_programs import program_text
from aicluster.render.slurm_monitoring import node_programs as monitoring_programs

SCRATCH_PROGRAM = "aicluster-scratch"
CONTAINERS_PROGRAM = "aicluster-containers"
PYXIS_BUILD_PROGRAM = "aicluster-pyxis-build"   # the head's, never a node's
CONTAINER_USAGE = "srun --container-image"    # how a job uses them: pyxis's option
# What the head builds for the nodes, in the cluster's own bucket (S3 on AWS, Cloud Storage on
# GCP): the head writes under this prefix and the compute and login nodes read it, nothing else
# of it either way (aws/slurm.py, aws/login.py, gcp/slurm.py, gcp/login.py grant exactly that).
ARTIFACT_PREFIX = "artifacts/"
PYXIS_ARTIFACT_PREFIX = f"{ARTIFACT_PREFIX}pyxis/"
PYXIS_FETCH_UNIT = "aicluster-pyxis"          # a node's retrying fetch, while the head has not published
PYXIS_BUILD_UNIT = "aicluster-pyxis-build"    # the head's retrying build


def pyxis_artifact_dir(pins: Containers | None = None) -> str:
    """Where the head publishes spank_pyxis.so for the nodes, short of the architecture:
    `<dir>/<dpkg arch>/spank_pyxis.so`, its SHA-256 at `.../spank_pyxis.so.sha256`. Named by
    pyxis's version and source digest and by the Slurm package version it is built against, so a
    new pin of either is a new key, built again, never a rewrite of one a node may be reading."""
    c = pins or containers()
    return f"{PYXIS_ARTIFACT_PREFIX}{c.pyxis.version}-{c.pyxis.sha256[:12]}/slurm-{slurm_release().version}"


def containers_program(pins: Containers | None = None) -> str:
    """aicluster-containers. `pins` defaults to the catalog's (tests give their own digests)."""
    return _render_containers(pins) if pins else _catalog_containers()


@functools.lru_cache(maxsize=1)
def _catalog_containers() -> str:
    return _render_containers(containers())


def _render_containers(pins: Containers) -> str:
    return render("scripts/aicluster-containers.sh.j2", c=pins, scratch=SCRATCH, pyxis_dir=pyxis_artifact_dir(pins),
                  slurm_version=slurm_release().version, unit=PYXIS_FETCH_UNIT)


def pyxis_build_program(pins: Containers | None = None) -> str:
    """aicluster-pyxis-build, the head's: pyxis from its pinned source archive against the cluster's
    Slurm headers, published with its SHA-256 where aicluster-containers looks. `pins` as above."""
    return _render_build(pins) if pins else _catalog_build()


@functools.lru_cache(maxsize=1)
def _catalog_build() -> str:
    return _render_build(containers())


def _render_build(c: Containers) -> str:
    return render("scripts/aicluster-pyxis-build.sh.j2", c=c, pyxis_dir=pyxis_artifact_dir(c),
                  slurm_version=slurm_release().version, unit=PYXIS_BUILD_UNIT)


def node_local_programs() -> dict[str, str]:
    """{program name: text} of the programs a node installs in its bin directory: also what watches
    it (aicluster-monitoring and aicluster-node-metrics, slurm_monitoring.py)."""
    return {SCRATCH_PROGRAM: program_text("aicluster-scratch"),
            CONTAINERS_PROGRAM: containers_program(),
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


def containers_gap(arch: str = "amd64") -> str | None:
    """Why a node of `arch` (dpkg's name) cannot set up its containers, or None when it can: an
    architecture without enroot's .deb digests installs nothing (aicluster-containers says so and
    ends well), so its nodes join Slurm without containers; pyxis is built by the head for the
    head's architecture only."""
    c = containers()
    if arch in c.enroot.arches:
        return None
    return (f"NOT on {arch}: enroot {c.enroot.version} has no pinned {arch} .deb digest (catalog/node_local.yaml), "
            f"so these nodes boot and join Slurm without containers (jobs run without --container-image, "
            f"no DCGM exporter); and the head builds pyxis only for its own architecture "
            f"({', '.join(c.enroot.arches)})")


def containers_summary(arch: str = "amd64") -> str:
    c = containers()
    return containers_gap(arch) or f"enroot {c.enroot.version} + pyxis {c.pyxis.version} ({CONTAINER_USAGE})"


def containers_json(arch: str = "amd64") -> dict[str, Any]:
    c = containers()
    return {"enroot_version": c.enroot.version, "pyxis_version": c.pyxis.version, "pyxis_commit": c.pyxis.commit,
            "usage": CONTAINER_USAGE, "arch": arch, "pinned": containers_gap(arch) is None,
            "gap": containers_gap(arch)}


def runs_node_local(design, pool) -> bool:
    """/scratch and containers are set up by the Slurm node bootstrap: not on Kubernetes clusters,
    nor on TPU slices (no Slurm node bootstrap of their own)."""
    return design.slurm is not None and not getattr(pool, "tpu", None)


def pool_plan_lines(design, pool) -> list[str]:
    """The plan's lines for one pool of a Slurm cluster: its /scratch and its containers."""
    if not runs_node_local(design, pool):
        return []
    return [f"    {SCRATCH} {scratch_summary(pool.instance.name)}; containers {containers_summary(pool.instance.dpkg_arch)}"]


def pool_node_local_json(design, pool) -> dict[str, Any]:
    """The same facts for `aicluster plan --format json`: {"scratch", "containers"}, each null
    where pool_plan_lines prints nothing (scratch also null on a type without local NVMe)."""
    if not runs_node_local(design, pool):
        return {"scratch": None, "containers": None}
    scratch = node_scratch(pool.instance.name)
    return {"scratch": scratch.to_json() if scratch else None, "containers": containers_json(pool.instance.dpkg_arch)}
