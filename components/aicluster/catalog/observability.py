"""The one list of exporters, metrics and scrape settings (observability.yaml). Pure: no Pulumi, no
spec. The alert rules and the dashboards name metrics only through `metric()`, `fabric()` and
`contract()`, so a metric missing here is an error at render time, not a silent empty panel.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from aicluster.catalog import CatalogError, load_yaml

_FILE = Path(__file__).parent / "observability.yaml"


@dataclass(frozen=True)
class Scrape:
    """How often and how long metrics are scraped."""
    interval_s: int
    timeout_s: int
    evaluation_interval_s: int
    target_labels: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Exporter:
    """One metrics exporter of the observability catalog."""
    key: str
    port: int
    runs_on: str
    pin: str                       # image:tag, version or version@commit: what is installed
    source: str
    checked: str
    counters: tuple[str, ...] = ()  # DCGM: the fields of its counters CSV
    counter_types: tuple[str, ...] = ()   # each counter's Prometheus type (gauge | counter), in order
    image: str = ""                 # the container image:tag on Kubernetes; "" where none runs there


@dataclass(frozen=True)
class Metric:
    """One metric of the observability catalog."""
    key: str
    name: str
    exporter: str
    type: str
    unit: str


@dataclass(frozen=True)
class FabricCounters:
    """A fabric's counters, per kind of fabric."""
    kind: str                      # efa | rdma | gvnic
    rx: str
    tx: str
    selector: str                  # PromQL label matchers inside {}, "" for none
    exporter: str
    source: str


@dataclass(frozen=True)
class Contract:
    """One metric contract of the observability catalog: a series, its labels and its writer."""
    key: str
    name: str
    type: str
    labels: tuple[str, ...]
    writer: str
    source: str


def _need(entry: dict, where: str, *keys: str) -> None:
    for key in keys:
        if not entry.get(key):
            raise CatalogError(f"observability.yaml: {where} has no {key}")


@functools.lru_cache(maxsize=1)
def _doc() -> dict:
    return load_yaml(_FILE.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def scrape() -> Scrape:
    s = _doc()["scrape"]
    _need(s, "scrape", "source", "checked")
    return Scrape(int(s["interval_s"]), int(s["timeout_s"]), int(s["evaluation_interval_s"]),
                  tuple(s["target_labels"]), s["source"])


def _pin(e: dict) -> str:
    if "image" in e:
        return f"{e['image']}:{e['tag']}"
    if "commit" in e:
        return f"{e['repo']}@v{e['version']} ({e['commit'][:12]})"
    return str(e.get("version", "the cluster's pin (kubernetes.yaml)"))


@functools.lru_cache(maxsize=1)
def exporters() -> dict[str, Exporter]:
    out = {}
    for key, e in _doc()["exporters"].items():
        _need(e, f"exporters.{key}", "source", "checked", "port", "runs_on")
        counters = e.get("counters") or {}
        out[key] = Exporter(key, int(e["port"]), e["runs_on"], _pin(e), e["source"], str(e["checked"]),
                            tuple(counters), tuple(counters.values()), _image(e))
    return out


def _image(e: dict) -> str:
    if "image" in e:
        return f"{e['image']}:{e['tag']}"
    if "image_k8s" in e:
        return f"{e['image_k8s']}:v{e['version']}"
    return ""


def counters_csv() -> str:
    """dcgm-exporter's counters file (-f): `field, type, help` per line, the fields of the one list."""
    dcgm = exporters()["dcgm_exporter"]
    return "".join(f"{name}, {kind}, {name} (aicluster observability.yaml)\n"
                   for name, kind in zip(dcgm.counters, dcgm.counter_types))


@functools.lru_cache(maxsize=1)
def collector_image() -> str:
    """The EKS collector's image:tag (Prometheus in agent mode)."""
    c = _doc()["collector"]
    _need(c, "collector", "image", "tag", "source", "checked")
    return f"{c['image']}:{c['tag']}"


@functools.lru_cache(maxsize=1)
def _metrics() -> dict[str, Metric]:
    known = set(exporters()) | {"textfile"}
    out = {}
    for key, m in _doc()["metrics"].items():
        if m["exporter"] not in known:
            raise CatalogError(f"observability.yaml: metrics.{key} names exporter {m['exporter']!r}, not one listed")
        out[key] = Metric(key, m["name"], m["exporter"], m["type"], str(m["unit"]))
    dcgm = set(exporters()["dcgm_exporter"].counters)
    for m in out.values():
        if m.exporter == "dcgm_exporter" and m.name not in dcgm:
            raise CatalogError(f"observability.yaml: metrics.{m.key} ({m.name}) is not in dcgm_exporter.counters")
    return out


def metric(key: str) -> str:
    """The series name of a metric role (KeyError: not in the one list)."""
    return _metrics()[key].name


def metrics() -> tuple[Metric, ...]:
    return tuple(_metrics().values())


@functools.lru_cache(maxsize=1)
def _fabric() -> dict[str, FabricCounters]:
    out = {}
    for kind, f in _doc()["fabric"].items():
        _need(f, f"fabric.{kind}", "source", "rx", "tx")
        out[kind] = FabricCounters(kind, f["rx"], f["tx"], f.get("selector") or "", f["exporter"], f["source"])
    return out


def fabric(kind: str) -> FabricCounters:
    return _fabric()[kind]


@functools.lru_cache(maxsize=1)
def _contracts() -> dict[str, Contract]:
    out = {}
    for key, c in _doc()["contracts"].items():
        _need(c, f"contracts.{key}", "source", "writer", "name")
        out[key] = Contract(key, c["name"], c["type"], tuple(c.get("labels", ())), c["writer"], c["source"])
    return out


def contract(key: str) -> Contract:
    return _contracts()[key]


def contracts() -> tuple[Contract, ...]:
    return tuple(_contracts().values())


def textfile_directory() -> str:
    """node_exporter's textfile directory: where aicluster-node-metrics and training jobs write."""
    return _doc()["exporters"]["node_exporter"]["textfile_directory"]


# The architectures a Slurm node can have, as `uname -m` prints them -> as release assets name them
# (the instance types' `arch`, aws.yaml / gcp.yaml): every tarball is pinned for each.
NODE_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Download:
    """A release file a Slurm node downloads, and the SHA-256 it must have (for one architecture)."""
    url: str
    sha256: str
    version: str


@dataclass(frozen=True)
class SlurmNodeAgents:
    """What the Slurm VMs install (observability.yaml slurm_nodes): the same pins as Kubernetes."""
    node_exporter: Download        # x86_64 (amd64)
    prometheus: Download           # the AWS nodes' agent (Prometheus in agent mode), x86_64
    dcgm_image: str                # image:tag of dcgm-exporter that enroot runs (Kubernetes' own)
    slurm_exporter_module: str
    slurm_exporter_version: str
    go_package: str
    cloudwatch_agent: dict         # AWS log shipper: deb_url, sig_url, key_url, key_fingerprint, version
    ops_agent: dict                # GCP metrics and log agent: script_url, version
    # The same releases for aarch64 (Grace: p6e-gb200, a4x): the same versions, their own digests.
    node_exporter_arm64: Download | None = None
    prometheus_arm64: Download | None = None

    def by_arch(self) -> tuple[tuple[str, str, Download, Download], ...]:
        """(uname -m, asset arch, node_exporter, prometheus) for every architecture a node can have."""
        return (("x86_64", "amd64", self.node_exporter, self.prometheus),
                ("aarch64", "arm64", self.node_exporter_arm64, self.prometheus_arm64))


def _arch_url(template: str, version: str, arch: str = "amd64") -> str:
    return template.replace("{version}", version).replace("{arch}", arch)


def _arch_digests(entry: dict, where: str) -> dict[str, str]:
    """`sha256` of a release tarball: a hex SHA-256 for every architecture of NODE_ARCHES, none other.
    An architecture without one is refused: a node of it would run an unchecked download."""
    table = entry.get("sha256")
    if not isinstance(table, dict):
        raise CatalogError(f"observability.yaml: {where}.sha256 is {table!r}, not a table of architecture: SHA-256")
    allowed = tuple(NODE_ARCHES.values())
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise CatalogError(f"observability.yaml: {where}.sha256 names {', '.join(map(str, unknown))}; "
                           f"the architectures are {', '.join(allowed)}")
    for arch in allowed:
        value = table.get(arch)
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise CatalogError(f"observability.yaml: {where}.sha256.{arch} is {value!r}, not a hex SHA-256 "
                               f"(every architecture a Slurm node has, {', '.join(allowed)}, needs one)")
    return {arch: table[arch] for arch in allowed}


@functools.lru_cache(maxsize=1)
def slurm_node_agents() -> SlurmNodeAgents:
    doc = _doc()
    nodes = doc["slurm_nodes"]
    for key, entry in nodes.items():
        _need(entry, f"slurm_nodes.{key}", "source", "checked")
    ne = doc["exporters"]["node_exporter"]
    dcgm = doc["exporters"]["dcgm_exporter"]
    slurm = doc["exporters"]["slurm_exporter"]
    prom_version = doc["collector"]["tag"].lstrip("v")
    ne_sha = _arch_digests(nodes["node_exporter"], "slurm_nodes.node_exporter")
    prom_sha = _arch_digests(nodes["agent"], "slurm_nodes.agent")

    def node_exporter(arch: str) -> Download:
        return Download(_arch_url(ne["url"], ne["version"], arch), ne_sha[arch], ne["version"])

    def prometheus(arch: str) -> Download:
        return Download(_arch_url(nodes["agent"]["url"], prom_version, arch), prom_sha[arch], prom_version)

    return SlurmNodeAgents(
        node_exporter=node_exporter("amd64"), prometheus=prometheus("amd64"),
        node_exporter_arm64=node_exporter("arm64"), prometheus_arm64=prometheus("arm64"),
        dcgm_image=f"{dcgm['image']}:{dcgm['tag']}",
        slurm_exporter_module=nodes["slurm_exporter"]["module"], slurm_exporter_version=slurm["version"],
        go_package=nodes["slurm_exporter"]["go_package"],
        cloudwatch_agent=dict(nodes["cloudwatch_agent"]), ops_agent=dict(nodes["ops_agent"]))
