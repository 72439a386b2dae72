"""Where aicluster can build (regions.yaml beside this module): each cloud's regions and zones,
and where each catalog instance type, machine type and TPU generation is offered.

The spec's region and zone checks (spec/cluster.py) and `aicluster preflight`'s offline checks
(commands/preflight.py, docs/preflight.md) read it. Every list carries `source:` and `checked:`;
the loader refuses a list without them, as the rest of the catalog does.

Offerings answer three ways: True (the source lists it there), False (the source covers that
place and does not list it) and None (the source says nothing about that place: a region the
recorded data does not cover, a type with no entry). None is "could not check", never a pass.

May import: aicluster.catalog (PyYAML) only: the policy pack loads the catalog.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Mapping

from aicluster.catalog import CatalogError, load_yaml

_HERE = Path(__file__).parent
Cloud = Literal["aws", "gcp"]


@dataclass(frozen=True)
class Sourced:
    """Where a list was read, and when."""
    source: str
    checked: str


@dataclass(frozen=True)
class Offering:
    """Where one instance type (AWS, by region) or machine type / TPU generation (GCP, by zone) is offered."""
    name: str
    level: Literal["region", "zone"]
    places: tuple[str, ...]           # regions (level region) or zone names (level zone)
    covers: tuple[str, ...] | None    # the regions the source speaks for; None: every region
    origin: Sourced


@dataclass(frozen=True)
class CloudPlaces:
    """One cloud's regions, zones and offerings."""
    cloud: Cloud
    zones: Mapping[str, tuple[str, ...]]      # region -> its zone names, in order
    origin: Sourced
    offerings: Mapping[str, Offering]         # instance/machine type or TPU generation -> where

    def regions(self) -> list[str]:
        return sorted(self.zones)

    def zone_name(self, region: str, suffix: str) -> str:
        return f"{region}{suffix}" if self.cloud == "aws" else f"{region}-{suffix}"

    def region_of(self, zone: str) -> str | None:
        """The region a known zone belongs to, or None."""
        for region, zones in self.zones.items():
            if zone in zones:
                return region
        return None

    def offered(self, name: str, region: str, zone: str) -> tuple[bool | None, Offering | None]:
        """Whether `name` is offered where the cluster is: (True | False | None, the entry used)."""
        entry = self.offerings.get(name)
        if entry is None:
            return None, None
        if entry.level == "region":
            if entry.covers is not None and region not in entry.covers:
                return None, entry
            return region in entry.places, entry
        return zone in entry.places, entry

    def places_in_region(self, entry: Offering, region: str) -> list[str]:
        """The zones of `region` an entry of zone level lists (to suggest one)."""
        return [z for z in entry.places if z in self.zones.get(region, ())]


def _origin(doc: dict, where: str) -> Sourced:
    source, checked = doc.get("source"), doc.get("checked")
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"regions.yaml {where}: every list needs a non-empty `source:`")
    if not isinstance(checked, str) or len(checked) != 10:
        raise CatalogError(f"regions.yaml {where}: every list needs `checked:` as a quoted YYYY-MM-DD date")
    return Sourced(" ".join(source.split()), checked)


def _cloud(cloud: Cloud, doc: dict) -> CloudPlaces:
    regions = doc["regions"]
    origin = _origin(regions, f"{cloud}.regions")
    zones: dict[str, tuple[str, ...]] = {}
    for region, suffixes in regions["zones"].items():
        if not suffixes:
            raise CatalogError(f"regions.yaml {cloud}.regions.zones.{region}: no zones")
        zones[region] = tuple(f"{region}{s}" if cloud == "aws" else f"{region}-{s}" for s in suffixes)
    offerings: dict[str, Offering] = {}
    if cloud == "aws":
        doc_off = doc["offerings"]
        off_origin = _origin(doc_off, "aws.offerings")
        covers = tuple(doc_off["covers"])
        for name, places in doc_off["types"].items():
            offerings[name] = Offering(name, "region", tuple(places), covers, off_origin)
        # Types moto's recording does not have yet (P6e-GB200): each group with its own source and
        # the regions it speaks for, so elsewhere the answer stays "could not check".
        for i, group in enumerate(doc.get("offerings_announced") or ()):
            group_origin = _origin(group, f"aws.offerings_announced[{i}]")
            for name, places in group["types"].items():
                if name in offerings:
                    raise CatalogError(f"regions.yaml aws.offerings_announced[{i}]: {name} is listed twice")
                offerings[name] = Offering(name, "region", tuple(places), tuple(group["covers"]), group_origin)
    else:
        for kind in ("machine_types", "tpus"):
            doc_off = doc["offerings"][kind]
            off_origin = _origin(doc_off, f"gcp.offerings.{kind}")
            for name, places in doc_off["types"].items():
                offerings[name] = Offering(name, "zone", tuple(places), None, off_origin)
        # Machine types the GPU zones page was not read for, each group with its own source.
        for i, group in enumerate(doc["offerings"].get("announced") or ()):
            group_origin = _origin(group, f"gcp.offerings.announced[{i}]")
            for name, places in group["types"].items():
                if name in offerings:
                    raise CatalogError(f"regions.yaml gcp.offerings.announced[{i}]: {name} is listed twice")
                offerings[name] = Offering(name, "zone", tuple(places), None, group_origin)
    known_regions = set(zones)
    known_zones = {z for zs in zones.values() for z in zs}
    for entry in offerings.values():
        unknown = [p for p in (*entry.places, *(entry.covers or ())) if p not in
                   (known_regions if entry.level == "region" else known_zones | known_regions)]
        if unknown:
            raise CatalogError(f"regions.yaml {cloud} offerings of {entry.name}: unknown places {unknown}")
    return CloudPlaces(cloud, zones, origin, offerings)


@functools.lru_cache(maxsize=1)
def load_places() -> Mapping[str, CloudPlaces]:
    """cloud -> its regions, zones and offerings (regions.yaml)."""
    with open(_HERE / "regions.yaml", encoding="utf-8") as fh:
        doc = load_yaml(fh)
    return {cloud: _cloud(cloud, doc[cloud]) for cloud in ("aws", "gcp")}


def places(cloud: str) -> CloudPlaces:
    return load_places()[cloud]


# --- quotas (quotas.yaml) ------------------------------------------------------------------------


@dataclass(frozen=True)
class VcpuQuota:
    """One EC2 vCPU quota: its Service Quotas code and name."""
    code: str
    name: str


@dataclass(frozen=True)
class Quotas:
    """Which quota bounds each catalog type, and where each fact was read."""
    aws_groups: tuple[tuple[tuple[str, ...], VcpuQuota, VcpuQuota], ...]   # (families, on-demand, spot)
    aws_vcpu: Sourced
    aws_efa: Sourced
    aws_fsx_lustre: Sourced
    gcp_gpu_metrics: Mapping[str, str]     # machine type -> regional quota metric
    gcp_preemptible_prefix: str
    gcp_gpus: Sourced

    def aws_vcpu_quota(self, instance_type: str, spot: bool) -> VcpuQuota | None:
        """The vCPU quota of an instance type's family group (p5en.48xlarge -> P, trn1n -> Trn,
        m7i -> Standard), or None where quotas.yaml lists none (dl1, hpc7g, ...)."""
        letters = re.match(r"[a-z]*", instance_type).group()
        for families, on_demand, spot_quota in self.aws_groups:
            if letters in families:
                return spot_quota if spot else on_demand
        return None

    def gcp_gpu_metric(self, machine_type: str, preemptible: bool) -> str | None:
        metric = self.gcp_gpu_metrics.get(machine_type)
        if metric is None:
            return None
        return self.gcp_preemptible_prefix + metric if preemptible else metric


@functools.lru_cache(maxsize=1)
def load_quotas() -> Quotas:
    with open(_HERE / "quotas.yaml", encoding="utf-8") as fh:
        doc = load_yaml(fh)
    vcpu = doc["aws"]["vcpu"]
    groups = tuple((tuple(g["families"]), VcpuQuota(g["on_demand"], g["on_demand_name"]),
                    VcpuQuota(g["spot"], g["spot_name"])) for g in vcpu["groups"])
    gpus = doc["gcp"]["gpus"]
    return Quotas(groups, _origin(vcpu, "aws.vcpu"), _origin(doc["aws"]["efa"], "aws.efa"),
                  _origin(doc["aws"]["fsx_lustre"], "aws.fsx_lustre"), dict(gpus["metrics"]),
                  gpus["preemptible_prefix"], _origin(gpus, "gcp.gpus"))


__all__ = ["CloudPlaces", "Offering", "Quotas", "Sourced", "VcpuQuota", "load_places", "load_quotas", "places"]
