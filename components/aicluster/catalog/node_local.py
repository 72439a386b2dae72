"""What a Slurm node runs locally beside Slurm (node_local.yaml): the container stack's pins
(enroot, pyxis, the documented example image, the fabric directories mounted into containers) and
each instance type's local NVMe devices (assembled at /scratch). Pure: no Pulumi, no spec.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from aicluster.catalog import CatalogError, load_catalog, load_yaml

_FILE = Path(__file__).parent / "node_local.yaml"
SCRATCH = "/scratch"
_UNITS = ("GB", "GiB")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Enroot:
    """The pinned Enroot release of the catalog."""
    version: str
    deb_url: str          # {version} {package} {arch}
    packages: tuple[str, ...]
    sha256: dict          # arch (dpkg's name) -> {package: hex SHA-256 of its .deb}
    source: str

    def url(self, package: str, arch: str = "amd64") -> str:
        return self.deb_url.format(version=self.version, package=package, arch=arch)

    @property
    def arches(self) -> tuple[str, ...]:
        """The architectures whose every package is pinned (the only ones a node installs)."""
        return tuple(self.sha256)


@dataclass(frozen=True)
class Pyxis:
    """The pinned Pyxis release of the catalog."""
    version: str
    archive_url: str      # the tag's source archive, {version}
    sha256: str           # of that archive
    commit: str           # the tag's commit, for the record
    plugin: str           # where `make install` puts the SPANK plugin
    source: str

    @property
    def url(self) -> str:
        return self.archive_url.format(version=self.version)


@dataclass(frozen=True)
class Containers:
    """The container runtime pins of the catalog (Enroot and Pyxis)."""
    enroot: Enroot
    pyxis: Pyxis
    example_image: str
    example_source: str
    fabric_mounts_aws: tuple[str, ...]
    fabric_source: str


@dataclass(frozen=True)
class LocalNvme:
    """The local NVMe of one instance type: `devices` of `device_gb` each, bundled with the type.
    Sizes are in `unit`: "GB" as EC2 states them, "GiB" where the cloud states GiB (GCP Local SSD
    disks are 375 GiB), so a plan never calls 375 GiB "375 GB"."""

    devices: int
    device_gb: int
    source: str
    unit: str = "GB"

    @property
    def total_gb(self) -> int:
        return self.devices * self.device_gb


def _sourced(entry: dict, where: str) -> str:
    source = entry.get("source")
    if not source:
        raise CatalogError(f"node_local.yaml: {where} has no source")
    return source


@functools.lru_cache(maxsize=1)
def _doc() -> dict:
    return load_yaml(_FILE.read_text(encoding="utf-8"))


def _digest(value, where: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise CatalogError(f"node_local.yaml: {where} is {value!r}, not a hex SHA-256")
    return value


def _deb_digests(e: dict) -> dict:
    """arch -> {package: digest}, every package of `packages` pinned for every arch named."""
    table = e.get("sha256") or {}
    if not table:
        raise CatalogError("node_local.yaml: containers.enroot.sha256 pins no architecture")
    out = {}
    for arch, digests in table.items():
        missing = [p for p in e["packages"] if p not in (digests or {})]
        if missing:
            raise CatalogError(f"node_local.yaml: containers.enroot.sha256.{arch} has no digest for {', '.join(missing)}")
        out[arch] = {p: _digest(digests[p], f"containers.enroot.sha256.{arch}.{p}") for p in e["packages"]}
    return out


@functools.lru_cache(maxsize=1)
def containers() -> Containers:
    c = _doc()["containers"]
    e, p, img, fab = c["enroot"], c["pyxis"], c["example_image"], c["fabric_mounts"]
    return Containers(
        enroot=Enroot(str(e["version"]), e["deb_url"], tuple(e["packages"]), _deb_digests(e),
                      _sourced(e, "containers.enroot")),
        pyxis=Pyxis(str(p["version"]), p["archive_url"], _digest(p["sha256"], "containers.pyxis.sha256"), p["commit"],
                    p["plugin"], _sourced(p, "containers.pyxis")),
        example_image=img["image"], example_source=_sourced(img, "containers.example_image"),
        fabric_mounts_aws=tuple(fab["aws"]), fabric_source=_sourced(fab, "containers.fabric_mounts"))


@functools.lru_cache(maxsize=1)
def _local_nvme() -> dict[str, LocalNvme]:
    out = {}
    for name, e in _doc()["local_nvme"].items():
        unit = e.get("unit", "GB")
        if unit not in _UNITS:
            raise CatalogError(f"node_local.yaml: local_nvme.{name}.unit is {unit!r}, not one of {', '.join(_UNITS)}")
        out[name] = LocalNvme(int(e["devices"]), int(e["device_gb"]), _sourced(e, f"local_nvme.{name}"), unit)
    return out


def local_nvme(instance_type: str) -> LocalNvme | None:
    """The type's local NVMe (None: it has none, or the catalog does not know its devices)."""
    return _local_nvme().get(instance_type)


def local_nvme_types() -> tuple[str, ...]:
    return tuple(_local_nvme())


def check() -> None:
    """Every device count matches the instance type's total in aws.yaml/gcp.yaml where it gives one."""
    catalog = load_catalog()
    for name, nvme in _local_nvme().items():
        itype = catalog.find(name)
        if itype is None:
            raise CatalogError(f"node_local.yaml: local_nvme.{name} is not an instance type of the catalog")
        # local_nvme_gb is in GB: only a GB table compares with it number for number
        if nvme.unit == "GB" and itype.local_nvme_gb is not None and itype.local_nvme_gb != nvme.total_gb:
            raise CatalogError(f"node_local.yaml: local_nvme.{name}: {nvme.devices} x {nvme.device_gb} GB = "
                               f"{nvme.total_gb} GB, but the instance type says {itype.local_nvme_gb} GB")
