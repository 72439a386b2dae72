"""Two pinned facts about Slurm on the nodes, each from its own sourced YAML beside this module:

- slurm_release.yaml: the one Slurm package every role installs (head, login, compute), so no node
  ever runs a slurmd newer than the slurmctld it talks to (docs/config-sync.md, "Upgrading Slurm");
- nccl_check.yaml: the all_reduce_perf bus bandwidth aicluster-nccl-check expects per instance type.

Pure: no Pulumi, no spec. The renderer puts the first into every role's install lines; slurm_files
puts the second into cluster.json for the cluster's own instance types.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
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
    """The pinned Slurm release of the catalog."""
    release: str                    # Slurm's release, "23.11": what the upgrade rules count in
    upstream_version: str           # "23.11.4"
    package_version: str            # the Debian package version apt installs: slurmd=<this>
    source_package: str             # the apt pin covers every binary of this source package
    packages: Mapping[str, tuple[str, ...]]   # role -> what it installs at package_version
    distribution: str
    source: str

    def install_args(self, role: str) -> str:
        """`slurmd=23.11.4-1.2ubuntu5` ...: the role's packages at the pinned version, for apt-get."""
        return " ".join(f"{p}={self.package_version}" for p in self.packages[role])

    def hold_args(self, role: str) -> str:
        """What `apt-mark hold` keeps at the pin: the role's packages and the plugins they need."""
        return " ".join((*self.packages[role], "slurm-wlm-basic-plugins"))

    @property
    def apt_preferences(self) -> str:
        """/etc/apt/preferences.d/aicluster-slurm: priority > 1000 makes apt take (even downgrade
        to) the pinned version of every binary of the source package, whoever asks for it
        (slurmdbd in aicluster-accounting, an operator's `apt-get install sackd`, unattended
        upgrades); apt_preferences(5), "src:" names a source package."""
        return (f"# aicluster: one Slurm on every node ({self.upstream_version}); catalog/slurm_release.yaml\n"
                f"Package: src:{self.source_package}\n"
                f"Pin: version {self.package_version}\n"
                "Pin-Priority: 1001\n")


@functools.lru_cache(maxsize=1)
def slurm_release() -> SlurmRelease:
    e = _read("slurm_release.yaml")["slurm"]
    where = "slurm_release.yaml slurm"
    packages = {role: tuple(e["packages"][role]) for role in ROLES}
    version = str(e["package_version"])
    if not version.startswith(str(e["upstream_version"])):
        raise CatalogError(f"{where}: package_version {version!r} is not a build of {e['upstream_version']!r}")
    if not str(e["upstream_version"]).startswith(str(e["release"]) + "."):
        raise CatalogError(f"{where}: upstream_version {e['upstream_version']!r} is not of release {e['release']!r}")
    return SlurmRelease(release=str(e["release"]), upstream_version=str(e["upstream_version"]), package_version=version,
                        source_package=e["source_package"], packages=packages, distribution=e["distribution"],
                        source=_sourced(e, where))


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
    return NcclCheckFacts(pass_ratio=float(doc["pass_ratio"]), drain_ratio=float(doc["drain_ratio"]),
                          large_message_bytes=int(doc["large_message_bytes"]), expectations=expectations,
                          source=_sourced(doc, "nccl_check.yaml"))


def nccl_check_config(instance_types) -> dict:
    """The check's settings for cluster.json (`nccl_check`): the ratios and the expectation of each
    of the cluster's instance types that has one (a type without one is checked for errors only)."""
    facts = nccl_check_facts()
    return {"pass_ratio": facts.pass_ratio, "drain_ratio": facts.drain_ratio,
            "large_message_bytes": facts.large_message_bytes,
            "expected": {t: facts.expectations[t].facts() for t in sorted(set(instance_types))
                         if t in facts.expectations}}
