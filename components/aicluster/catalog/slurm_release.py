"""Two pinned facts about Slurm on the nodes, each from its own sourced YAML beside this module:

- slurm_release.yaml: the one Slurm every role builds from SchedMD's source archive (head, login,
  compute; aicluster-install-slurm), so no node ever runs a slurmd newer than the slurmctld it
  talks to (docs/config-sync.md, "Upgrading Slurm");
- nccl_check.yaml: the all_reduce_perf bus bandwidth aicluster-nccl-check expects per instance type.

Pure: no Pulumi, no spec. The renderer puts the first into every role's install command; slurm_files
puts the second into cluster.json for the cluster's own instance types.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from aicluster.catalog import CatalogError, load_catalog, load_yaml

_HERE = Path(__file__).parent
ROLES = ("head", "login", "compute")


def _read(name: str) -> dict:
    with open(_HERE / name, encoding="utf-8") as fh:
        return load_yaml(fh)


def _sourced(entry: dict, where: str) -> str:
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"{where}: every catalog entry needs a non-empty `source:`")
    return source


@dataclass(frozen=True)
class SlurmRelease:
    """The pinned Slurm release of the catalog: SchedMD's source archive every role builds."""
    release: str                    # Slurm's release, "24.11": what the upgrade rules count in
    version: str                    # "24.11.5": what `slurmd -V` answers
    urls: tuple[str, ...]           # where the archive is, tried in turn
    sha256: str                     # the archive's SHA-256: anything else is refused
    size: int                       # its size in bytes
    top_folder: str                 # the archive's one top folder
    distribution: str
    source: str
    archive_source: str

    @property
    def upstream_version(self) -> str:
        return self.version

    def install_args(self) -> str:
        """aicluster-install-slurm's arguments for the pinned archive (node/install_slurm.py)."""
        return " ".join(("--version", self.version, "--sha256", self.sha256, "--size", str(self.size), *self.urls))

    def pins(self) -> dict:
        """The pin as JSON-ready data (the baked image's pins, render/node_image.py)."""
        return {"release": self.release, "version": self.version, "urls": list(self.urls), "sha256": self.sha256,
                "size": self.size, "top_folder": self.top_folder}


@functools.lru_cache(maxsize=1)
def slurm_release() -> SlurmRelease:
    e = _read("slurm_release.yaml")["slurm"]
    where = "slurm_release.yaml slurm"
    a = e["archive"]
    if not str(e["version"]).startswith(str(e["release"]) + "."):
        raise CatalogError(f"{where}: version {e['version']!r} is not of release {e['release']!r}")
    sha256 = str(a["sha256"])
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise CatalogError(f"{where}.archive: sha256 {sha256!r} is not 64 lowercase hex digits")
    urls = tuple(str(u) for u in a["urls"])
    if not urls or any(not u.startswith(("https://", "http://")) for u in urls):
        raise CatalogError(f"{where}.archive: urls {urls!r} must be one or more http(s) URLs")
    return SlurmRelease(release=str(e["release"]), version=str(e["version"]), urls=urls, sha256=sha256,
                        size=int(a["size"]), top_folder=str(a["top_folder"]), distribution=e["distribution"],
                        source=_sourced(e, where), archive_source=_sourced(a, where + ".archive"))


@dataclass(frozen=True)
class BusbwExpectation:
    """The NCCL bus bandwidth an instance type is expected to reach."""
    instance_type: str
    busbw_gbs: float            # all_reduce_perf out-of-place busbw at large sizes, GB/s
    message_bytes: int          # the largest size of the run it comes from
    nodes: int                  # across this many nodes
    kind: str                   # measured | derived
    source: str

    def facts(self) -> dict:
        return {"busbw_gbs": self.busbw_gbs, "message_bytes": self.message_bytes, "nodes": self.nodes,
                "kind": self.kind, "source": self.source}


@dataclass(frozen=True)
class NcclCheckFacts:
    """The catalog's facts for the NCCL health check."""
    pass_ratio: float
    drain_ratio: float
    large_message_bytes: int
    expectations: Mapping[str, BusbwExpectation]
    source: str
    # Per accelerator: all_reduce over the NVLink of a multi-node NVLink domain (MNNVL).
    nvlink_domain: Mapping[str, BusbwExpectation] = field(default_factory=dict)


def _line_rate_gbs(instance_type: str) -> float:
    """The GPU fabric's line rate in GB/s (GCP: the GPU NICs; AWS: the EFA network)."""
    t = load_catalog().find(instance_type)
    if t is None:
        raise CatalogError(f"nccl_check.yaml expectations.{instance_type}: not in the instance catalog")
    gbps = t.gpu_network_gbps if t.cloud == "gcp" else t.network_gbps
    return gbps / 8


@functools.lru_cache(maxsize=1)
def nccl_check_facts() -> NcclCheckFacts:
    doc = _read("nccl_check.yaml")
    expectations = {}
    for name, e in doc["expectations"].items():
        where = f"nccl_check.yaml expectations.{name}"
        kind = e["kind"]
        if kind not in ("measured", "derived"):
            raise CatalogError(f"{where}: kind {kind!r} is not measured or derived")
        if "busbw_gbs" in e:
            busbw = float(e["busbw_gbs"])
        elif kind == "derived" and "efficiency" in e:
            busbw = round(_line_rate_gbs(name) * float(e["efficiency"]), 2)
        else:
            raise CatalogError(f"{where}: needs busbw_gbs, or kind derived with an efficiency")
        _line_rate_gbs(name)        # every entry names a type the catalog knows
        expectations[name] = BusbwExpectation(name, busbw, int(e["message_bytes"]), int(e["nodes"]), kind,
                                              _sourced(e, where))
    accelerators = load_catalog().accelerators
    nvlink = {}
    for model, e in (doc.get("nvlink_domain") or {}).items():
        where = f"nccl_check.yaml nvlink_domain.{model}"
        acc = accelerators.get(model)
        if acc is None:
            raise CatalogError(f"{where}: not an accelerator of accelerators.yaml")
        if "busbw_gbs" in e:
            busbw = float(e["busbw_gbs"])
        elif e.get("kind") == "derived" and "efficiency" in e and acc.scale_up_gbs:
            busbw = round(acc.scale_up_gbs * float(e["efficiency"]), 2)
        else:
            raise CatalogError(f"{where}: needs busbw_gbs, or kind derived with an efficiency and the "
                               "accelerator's scale_up_gbs")
        if e["kind"] not in ("measured", "derived"):
            raise CatalogError(f"{where}: kind {e['kind']!r} is not measured or derived")
        nvlink[model] = BusbwExpectation(model, busbw, int(e["message_bytes"]), int(e["nodes"]), e["kind"],
                                         _sourced(e, where))
    return NcclCheckFacts(pass_ratio=float(doc["pass_ratio"]), drain_ratio=float(doc["drain_ratio"]),
                          large_message_bytes=int(doc["large_message_bytes"]), expectations=expectations,
                          source=_sourced(doc, "nccl_check.yaml"), nvlink_domain=nvlink)


def nccl_check_config(instance_types) -> dict:
    """The check's settings for cluster.json (`nccl_check`): the ratios and the expectation of each
    of the cluster's instance types that has one (a type without one is checked for errors only),
    and, for a type whose NVLink domain spans nodes, the expectation of a run inside one domain
    (`nvlink_domain`: its accelerator's figure and the domain's nodes)."""
    facts = nccl_check_facts()
    types = sorted(set(instance_types))
    nvlink = {}
    for name in types:
        it = load_catalog().find(name)
        if it is None or it.nodes_per_nvlink_domain <= 1 or it.accelerator.model not in facts.nvlink_domain:
            continue
        nvlink[name] = facts.nvlink_domain[it.accelerator.model].facts() | {"domain_nodes": it.nodes_per_nvlink_domain}
    config = {"pass_ratio": facts.pass_ratio, "drain_ratio": facts.drain_ratio,
              "large_message_bytes": facts.large_message_bytes,
              "expected": {t: facts.expectations[t].facts() for t in types if t in facts.expectations}}
    if nvlink:
        config["nvlink_domain"] = nvlink
    return config
