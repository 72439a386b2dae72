"""The pinned Kubernetes versions (kubernetes.yaml: EKS add-ons, charts, images, GKE's channel and
accelerators; every entry sourced) and their loader, plus the fixed GKE choices the spec checks
against. Pure: no Pulumi, no spec. kubernetes_design and gke_design build on these.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from aicluster.catalog import CatalogError, load_yaml

_VERSIONS_FILE = Path(__file__).parent / "kubernetes.yaml"

# GKE node pool that runs the system pods (its name is taken: no user pool may use it).
SYSTEM_POOL = "system"
# A training node runs one worker and a few DaemonSets: 32 pods per node gives each node a /26 of
# the pod range, so the /14 below holds 4096 nodes. Both are fixed: a pod range that followed the
# pools would replace the cluster on a routine edit.
MAX_PODS_PER_NODE = 32
POD_RANGE_PREFIX = 14
MAX_NODES = 2 ** (32 - POD_RANGE_PREFIX) // 2 ** (32 - 26)      # nodes the pod range holds


@dataclass(frozen=True)
class Chart:
    """One pinned Helm chart of the Kubernetes catalog."""
    name: str
    repo: str
    chart: str
    version: str
    namespace: str
    source: str
    api_version: str | None = None
    used_by: tuple[str, ...] = ("eks",)   # the platforms that install it: eks, gke


@dataclass(frozen=True)
class GkeVersions:
    """What GKE clusters pin (kubernetes.yaml `gke`): release channel, minimum version, the GPU
    driver GKE installs, the node image, and each GPU machine type's GKE accelerator name."""

    release_channel: str
    version: str
    gpu_driver_version: str
    image_type: str
    accelerators: Mapping[str, str]    # machine type -> cloud.google.com/gke-accelerator
    # Machine type prefixes whose flex-start node pools may be placed COMPACT (A3 Ultra, A4, H4D).
    flex_start_compact: tuple[str, ...] = ()
    # Accelerator kinds whose node pools keep Secure Boot while mounting Managed Lustre (gpu).
    lustre_secure_boot: tuple[str, ...] = ("gpu",)
    # The cluster's maintenance policy (kubernetes.yaml gke.maintenance): window, limits, exclusion.
    maintenance: Mapping = dataclasses.field(default_factory=dict)

    def flex_start_compact_ok(self, machine_type: str) -> bool:
        return machine_type.startswith(self.flex_start_compact)


@dataclass(frozen=True)
class NcclInstaller:
    """The NCCL installer DaemonSet of a GPU NIC stack on GKE, and the RxDM sidecar image."""

    stack: str                         # tcpx | tcpxo | rdma
    image: str
    rxdm_image: str | None
    source: str
    image_arm64: str | None = None     # the plugin's arm64 build (Grace nodes), where it has one


@dataclass(frozen=True)
class Versions:
    """The pinned Kubernetes and add-on versions of the catalog."""
    kubernetes: str
    schema_version: str
    addons: Mapping[str, str]          # EKS add-on name -> version
    ami_types: Mapping[str, Mapping]   # role -> {ami_type, root_device, instance_families}
    charts: Mapping[str, Chart]
    images: Mapping[str, str]
    sources: Mapping[str, str]         # "kubernetes", "addon:<name>", "chart:<name>", ... -> source
    image_users: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)   # image -> platforms
    gke: GkeVersions | None = None
    nccl_installers: Mapping[str, NcclInstaller] = dataclasses.field(default_factory=dict)
    packages: Mapping[str, str] = dataclasses.field(default_factory=dict)   # name -> pip requirement
    # Platform (eks, gke) -> the lowest cluster version that takes pools of multi-node NVLink
    # domains (kubernetes.yaml nvlink_domains.min_version).
    nvlink_min_versions: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def platform_charts(self, platform: str) -> dict[str, Chart]:
        return {n: c for n, c in self.charts.items() if platform in c.used_by}

    def platform_images(self, platform: str) -> dict[str, str]:
        return {n: i for n, i in self.images.items() if platform in self.image_users.get(n, ("eks",))}


def _sourced(entry: Mapping, where: str) -> str:
    """The entry's source, once it has one and the date it was checked on (`checked:`, a YAML date
    no later than today): a pin nobody can say when it was last looked at is refused."""
    source = entry.get("source") if isinstance(entry, Mapping) else None
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"kubernetes.yaml {where}: every entry needs a non-empty `source:`")
    checked = entry.get("checked")
    if not isinstance(checked, datetime.date) or isinstance(checked, datetime.datetime):
        raise CatalogError(f"kubernetes.yaml {where}: every entry needs `checked:`, the date (YYYY-MM-DD) its "
                           f"source was last consulted, not {checked!r}")
    if checked > datetime.date.today():
        raise CatalogError(f"kubernetes.yaml {where}: `checked: {checked}` is in the future")
    return source


@functools.lru_cache(maxsize=1)
def versions() -> Versions:
    doc = load_yaml(_VERSIONS_FILE.read_text(encoding="utf-8"))
    return versions_from(doc)


def versions_from(doc: Mapping) -> Versions:
    """Parse the versions document (the tests feed altered copies)."""
    sources = {"kubernetes": _sourced(doc["kubernetes"], "kubernetes")}
    addons = {}
    for name, entry in doc["eks_addons"].items():
        sources[f"addon:{name}"] = _sourced(entry, f"eks_addons.{name}")
        addons[name] = str(entry["version"])
    amis = {}
    for role, entry in doc["ami_types"].items():
        sources[f"ami:{role}"] = _sourced(entry, f"ami_types.{role}")
        amis[role] = dict(entry)
    charts = {}
    for name, entry in doc["charts"].items():
        sources[f"chart:{name}"] = _sourced(entry, f"charts.{name}")
        charts[name] = Chart(name=name, repo=entry["repo"], chart=entry["chart"], version=str(entry["version"]),
                             namespace=entry["namespace"], source=entry["source"],
                             api_version=entry.get("api_version"), used_by=tuple(entry.get("used_by", ["eks"])))
    images, image_users = {}, {}
    for name, entry in doc["images"].items():
        sources[f"image:{name}"] = _sourced(entry, f"images.{name}")
        images[name] = entry["image"]
        image_users[name] = tuple(entry.get("used_by", ["eks"]))
    gke = None
    if "gke" in doc:
        g = doc["gke"]
        sources["gke"] = _sourced(g, "gke")
        sources["gke:accelerators"] = _sourced(g["accelerators"], "gke.accelerators")
        sources["gke:flex-start-compact"] = _sourced(g["flex_start_compact"], "gke.flex_start_compact")
        sources["gke:lustre-secure-boot"] = _sourced(g["lustre_secure_boot"], "gke.lustre_secure_boot")
        if "maintenance" in g:
            sources["gke:maintenance"] = _sourced(g["maintenance"], "gke.maintenance")
        gke = GkeVersions(release_channel=str(g["release_channel"]), version=str(g["version"]),
                          gpu_driver_version=str(g["gpu_driver_version"]), image_type=str(g["image_type"]),
                          accelerators={k: str(v) for k, v in g["accelerators"].items()
                                        if k not in ("source", "checked")},
                          flex_start_compact=tuple(str(m) for m in g["flex_start_compact"]["machine_type_prefixes"]),
                          lustre_secure_boot=tuple(str(k) for k in g["lustre_secure_boot"]["accelerators"]),
                          maintenance={k: v for k, v in (g.get("maintenance") or {}).items()
                                       if k not in ("source", "checked")})
    installers = {}
    for stack, entry in (doc.get("nccl_installers") or {}).items():
        sources[f"nccl-installer:{stack}"] = _sourced(entry, f"nccl_installers.{stack}")
        installers[stack] = NcclInstaller(stack, entry["image"], entry.get("rxdm_image"), entry["source"],
                                          entry.get("image_arm64"))
    packages = {}
    for name, entry in (doc.get("packages") or {}).items():
        sources[f"package:{name}"] = _sourced(entry, f"packages.{name}")
        packages[name] = str(entry["requirement"])
    nvlink: dict[str, str] = {}
    if "nvlink_domains" in doc:
        sources["nvlink-domains"] = _sourced(doc["nvlink_domains"], "nvlink_domains")
        nvlink = {str(k): str(v) for k, v in doc["nvlink_domains"]["min_version"].items()}
    return Versions(kubernetes=str(doc["kubernetes"]["version"]),
                    schema_version=str(doc["kubernetes"]["schema_version"]),
                    addons=addons, ami_types=amis, charts=charts, images=images, sources=sources,
                    image_users=image_users, gke=gke, nccl_installers=installers, packages=packages,
                    nvlink_min_versions=nvlink)


def version_tuple(version: str) -> tuple[int, ...]:
    """"1.35" -> (1, 35): Kubernetes versions compare by their numbers, not as strings."""
    return tuple(int(part) for part in version.split("."))


def second_zone(zone: str) -> str:
    """The default second zone for the control plane: the zone's neighbour (a <-> b)."""
    return zone[:-1] + ("b" if zone.endswith("a") else "a")
