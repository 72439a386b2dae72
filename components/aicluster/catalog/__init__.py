"""Hardware and service facts, loaded from the YAML files beside this module.

Every entry carries `source:`; the loader refuses a file where one is missing, so an unsourced
number cannot slip in. Nothing here imports Pulumi: the design, the balance model and the policy
pack all read the same facts.

May import: aicluster.errors, limits and resources only, and PyYAML: the policy pack loads it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml

Cloud = Literal["aws", "gcp"]
# An instance type's CPU architecture (EC2's name) -> the name Debian packages and release assets use.
DPKG_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
_HERE = Path(__file__).parent


@dataclass(frozen=True)
class Accelerator:
    """One accelerator model of the catalog, with its sourced figures."""
    model: str
    vendor: str
    kind: str                       # gpu | trainium | tpu
    gres_type: str                  # the Slurm GRES type name
    memory_mib: int
    bf16_tflops: float | None       # dense; None where no primary source was found
    hbm_bandwidth_gbs: float | None
    source: str
    fp8_tflops: float | None = None     # dense; None: no FP8 tensor cores or not sourced
    scale_up_gbs: float | None = None   # NVLink per chip, one direction, GB/s; None: not sourced
    scale_up_source: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


@dataclass(frozen=True)
class InstanceType:
    """One instance (machine) type of the catalog, with its sourced figures."""
    name: str
    cloud: Cloud
    accelerator: Accelerator
    accelerator_count: int
    vcpu: int | None
    memory_gib: int | None
    network_gbps: float
    source: str
    cores: int | None = None
    threads_per_core: int | None = None
    sockets: int | None = None          # CPU sockets; None: not sourced (Slurm is told one socket)
    gpus_per_socket: int | None = None  # GPUs 0..n-1 on socket 0, the next n on socket 1, ...; None: not sourced
    # AWS fabric
    network_cards: int = 1
    max_efa_interfaces: int = 0
    efa_cards: tuple[int, ...] = ()
    gpudirect_rdma: bool | None = None
    local_nvme_gb: int | None = None
    # GCP fabric
    host_nics: int = 1
    gpu_nics: int = 0
    gpu_nic_stack: str = "none"
    gpu_network_gbps: float = 0.0
    nic_mtu: int | None = None          # MTU of the VPCs its NICs attach to
    boot_disk_type: str | None = None   # pd-ssd | hyperdisk-balanced ...
    image: str | None = None            # key of its cloud's `images` its pools boot by default (AWS: an image role)
    # NVLink domain: GPUs on one NVLink fabric. None: the node's own GPUs (an 8-GPU HGX board);
    # an NVL72 node type (GB200/GB300) sets 72, so capacity comes in whole domains of 72 / count nodes.
    nvlink_domain: int | None = None
    nvlink_domain_source: str = ""
    # The smallest block of nodes the cloud sells for a multi-node NVLink domain (AWS: a 9-node
    # UltraServer, half an NVL72 rack); None: one whole domain.
    capacity_unit_nodes: int | None = None
    # CPU architecture in EC2's words (DescribeInstanceTypes ProcessorInfo.SupportedArchitectures):
    # what a node's downloads are pinned for (observability.yaml, node_local.yaml) and which image it boots.
    arch: str = "x86_64"

    @property
    def dpkg_arch(self) -> str:
        """The architecture as Debian packages and release assets name it (amd64, arm64)."""
        return DPKG_ARCH[self.arch]

    @property
    def family(self) -> str:
        return self.name.split(".")[0] if self.cloud == "aws" else "-".join(self.name.split("-")[:2])

    @property
    def nvlink_domain_gpus(self) -> int:
        """GPUs per NVLink domain; the node's GPU count unless the catalog says more."""
        return self.nvlink_domain or self.accelerator_count

    @property
    def nodes_per_nvlink_domain(self) -> int:
        """Nodes per NVLink domain: 1 for an HGX node, 18 for a GB200 NVL72 node of 4 GPUs."""
        return self.nvlink_domain_gpus // self.accelerator_count

    @property
    def nvlink_capacity_unit(self) -> int:
        """Nodes a pool of this type must come in multiples of: 1 unless the domain spans nodes."""
        return self.capacity_unit_nodes or self.nodes_per_nvlink_domain

    @property
    def efa_capable(self) -> bool:
        return self.max_efa_interfaces > 0

    @property
    def fabric_gbps(self) -> float:
        """Bandwidth the accelerators can use for collective traffic between nodes."""
        return self.network_gbps if self.cloud == "aws" else self.gpu_network_gbps

    @property
    def card_gbps(self) -> float:
        """AWS: bandwidth of one EFA card (the EFA cards are symmetric; p6-b300's card 0 is ENA only)."""
        return self.network_gbps / (len(self.efa_cards) or self.network_cards)

    @property
    def accelerator_memory_gib(self) -> float:
        return self.accelerator.memory_gib * self.accelerator_count


@dataclass(frozen=True)
class ControllerType:
    """A CPU instance type for controllers (the Slurm head node)."""

    name: str
    vcpu: int
    memory_gib: int
    network_gbps: float
    source: str
    cloud: Cloud = "aws"


@dataclass(frozen=True)
class GcpImage:
    """A GCP boot image (an image family link), pinned in gcp.yaml."""

    role: str
    image: str
    source: str


@dataclass(frozen=True)
class NicStack:
    """What a GCP GPU NIC stack (tcpx, tcpxo, rdma) installs on a node, pinned in gcp.yaml."""

    name: str
    lib_dir: str
    source: str
    nccl_plugin_image: str | None = None
    rxdm_image: str | None = None
    apt_repository: str | None = None
    apt_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class FilestoreTier:
    """One Filestore tier of the catalog."""
    name: str
    ranges: tuple[tuple[int, int, int], ...]     # (min GiB, max GiB, step GiB)
    source: str

    def capacity_allowed(self, gib: int) -> bool:
        return any(lo <= gib <= hi and (gib - lo) % step == 0 for lo, hi, step in self.ranges)

    def capacity_rule(self) -> str:
        return "; ".join(f"{lo}-{hi} GiB in steps of {step}" for lo, hi, step in self.ranges)

    def nearest(self, gib: int) -> int:
        candidates = []
        for lo, hi, step in self.ranges:
            at = min(max(gib, lo), hi)
            down = lo + (at - lo) // step * step
            candidates += [down, min(down + step, hi)]
        return min(candidates, key=lambda c: (abs(c - gib), c))


@dataclass(frozen=True)
class TpuGeneration:
    """One TPU generation of the catalog."""
    name: str
    hbm_gib_per_chip: float
    hbm_bandwidth_gbs: float
    bf16_tflops: float
    ici_dims: int
    max_chips: int
    gke_accelerator: str
    machine_types: Mapping[int, str]
    single_host_topologies: Mapping[str, int]
    topologies: tuple[str, ...]
    source: str
    runtime_version: str | None = None          # Cloud TPU software version of a TPU VM
    dcn_gbps_per_chip: float | None = None      # data-center network per chip; None: not published
    hosts: Mapping[str, tuple[int, int]] = field(default_factory=dict)   # machine type -> (vCPU, GiB)
    host_source: str = ""
    boot_disk_type: str | None = None           # the boot disk type its hosts support (GKE node pools)
    ici_gbs_bidirectional: float | None = None  # ICI per chip, both directions, GB/s; None: not sourced
    ici_source: str = ""
    fp8_tflops: float | None = None             # dense FP8 per chip; None: not sourced
    # GKE places its slices by a HIGH_THROUGHPUT workload policy of the slice's topology (TPU7x),
    # not by placement_policy.tpu_topology; min_gke_version: the oldest GKE version that runs it.
    workload_policy: bool = False
    min_gke_version: str | None = None


@dataclass(frozen=True)
class FsxDeploymentType:
    """One FSx for Lustre deployment type of the catalog."""
    name: str
    storage_type: str
    throughput_mbps_per_tib: tuple[int, ...]
    capacity_first: tuple[int, ...]
    capacity_step: int
    source: str
    baseline_mbps_per_tib: int | None = None
    efa_capacity_step_gib: Mapping[int, int] = field(default_factory=dict)

    def capacity_allowed(self, gib: int) -> bool:
        if gib in self.capacity_first:
            return True
        last = self.capacity_first[-1]
        return gib > last and gib % self.capacity_step == 0

    def capacity_rule(self) -> str:
        first = ", ".join(str(c) for c in self.capacity_first)
        return f"{first}, then multiples of {self.capacity_step} GiB"

    def neighbours(self, gib: float) -> list[int]:
        """The allowed sizes just below and just above `gib` (for "did you mean")."""
        above = self.capacity_at_least(gib)
        below = [c for c in self.capacity_first if c < gib]
        if gib > self.capacity_first[-1]:
            below.append(max(self.capacity_first[-1], int(gib // self.capacity_step) * self.capacity_step))
        return sorted({*(below[-1:] if below else []), above} - {gib})

    def capacity_at_least(self, gib: float) -> int:
        for c in self.capacity_first:
            if c >= gib:
                return c
        step = self.capacity_step
        return int(-(-gib // step) * step)


@dataclass(frozen=True)
class ManagedLustreTier:
    """One Managed Lustre performance tier of the catalog."""
    throughput_mbps_per_tib: int
    min_capacity_gib: int
    source: str


class CatalogError(ValueError):
    """A catalog data file is malformed (a developer error, caught by the catalog tests)."""


@dataclass(frozen=True)
class Catalog:
    """Every sourced fact of the catalog files, loaded once."""
    accelerators: Mapping[str, Accelerator]
    instance_types: Mapping[str, Mapping[str, InstanceType]]   # cloud -> name -> type
    aliases: Mapping[str, Mapping[str, str]]                    # cloud -> alias -> type name
    images: Mapping[str, Mapping[str, str]]                     # AWS image roles
    controllers: Mapping[str, ControllerType]                   # controller types (AWS and GCP)
    tpus: Mapping[str, TpuGeneration]
    fsx: Mapping[str, FsxDeploymentType]
    managed_lustre: Mapping[int, ManagedLustreTier]
    gcp_images: Mapping[str, GcpImage] = field(default_factory=dict)
    nic_stacks: Mapping[str, NicStack] = field(default_factory=dict)
    filestore: Mapping[str, FilestoreTier] = field(default_factory=dict)

    def resolve(self, cloud: str, name: str) -> InstanceType | None:
        """An instance type by its name or an accelerator alias (`h100`), or None."""
        types = self.instance_types.get(cloud, {})
        if name in types:
            return types[name]
        alias = self.aliases.get(cloud, {}).get(name.lower())
        return types[alias] if alias else None

    def names(self, cloud: str) -> list[str]:
        """Every name a spec may use for `cloud`: instance types, then aliases."""
        return sorted(self.instance_types.get(cloud, {})) + sorted(self.aliases.get(cloud, {}))

    def find(self, name: str) -> InstanceType | None:
        """Any cloud's instance type by name (the catalog command and the policy pack use this)."""
        for cloud in self.instance_types:
            if name in self.instance_types[cloud]:
                return self.instance_types[cloud][name]
        return None


def _need(entry: dict, key: str, where: str):
    if key not in entry:
        raise CatalogError(f"{where}: missing {key!r}")
    return entry[key]


def _sourced(entry: dict, where: str) -> str:
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"{where}: every catalog entry needs a non-empty `source:`")
    return source


def _sockets(entry: dict, where: str) -> int | None:
    """CPU sockets: sourced on their own (`socket_source:`), and a whole number of cores each, as
    slurm.conf's CoresPerSocket must be."""
    sockets = entry.get("sockets")
    if sockets is None:
        return None
    if not entry.get("socket_source"):
        raise CatalogError(f"{where}: `sockets:` needs a `socket_source:`")
    cores = entry.get("cores")
    if not isinstance(sockets, int) or sockets < 1 or not cores or cores % sockets:
        raise CatalogError(f"{where}: sockets {sockets!r} must divide cores {cores!r}")
    return sockets


# libyaml's parser when PyYAML has it: the same documents (tests/test_catalog.py compares every
# catalog file both ways), ~10x faster than pure Python; the catalog is most of the YAML a plan
# reads. Only for the project's own files: user input goes through input_files' hardened loader.
_TRUSTED_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


def load_yaml(stream: Any) -> Any:
    """One of the project's own YAML files (a string or an open file), parsed by libyaml where
    PyYAML has it. Never for user input."""
    return yaml.load(stream, Loader=_TRUSTED_LOADER)


# libyaml's emitter for the configuration files a plan renders (prometheus.yml, the CloudWatch
# agent's and OpenTelemetry collector's configuration, alert rules): the same bytes as SafeDumper for
# their short scalars (tests/test_catalog.py and every stack's plan compare them), ~5x faster. Not
# for a document with a long quoted scalar: there libyaml folds lines differently (aws/observability's
# outer alert manager document, k8s_manifests).
_TRUSTED_DUMPER = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper


def dump_yaml(data: Any, **kwargs: Any) -> str:
    """yaml.safe_dump(data, **kwargs), through libyaml's emitter where PyYAML has it."""
    return yaml.dump(data, Dumper=_TRUSTED_DUMPER, **kwargs)


def _read(name: str) -> dict:
    with open(_HERE / name, encoding="utf-8") as fh:
        return load_yaml(fh)


def _instance(cloud: Cloud, name: str, e: dict, accelerators: Mapping[str, Accelerator]) -> InstanceType:
    where = f"{cloud}.yaml instance_types.{name}"
    model = _need(e, "accelerator", where)
    if model not in accelerators:
        raise CatalogError(f"{where}: unknown accelerator {model!r}")
    if "price" in e:
        raise CatalogError(f"{where}: prices live in prices.yaml (catalog.pricing), not in the instance entry")
    max_efa = int(e.get("max_efa_interfaces", 0))
    return InstanceType(
        name=name,
        cloud=cloud,
        accelerator=accelerators[model],
        accelerator_count=int(_need(e, "accelerator_count", where)),
        vcpu=e.get("vcpu"),
        memory_gib=e.get("memory_gib"),
        cores=e.get("cores"),
        threads_per_core=e.get("threads_per_core"),
        sockets=_sockets(e, where),
        gpus_per_socket=e.get("gpus_per_socket"),
        network_gbps=float(_need(e, "network_gbps", where)),
        source=_sourced(e, where),
        network_cards=int(e.get("network_cards", 1)),
        max_efa_interfaces=max_efa,
        efa_cards=tuple(e.get("efa_cards", range(max_efa))),
        gpudirect_rdma=e.get("gpudirect_rdma"),
        local_nvme_gb=e.get("local_nvme_gb"),
        host_nics=int(e.get("host_nics", 1)),
        gpu_nics=int(e.get("gpu_nics", 0)),
        gpu_nic_stack=e.get("gpu_nic_stack", "none"),
        gpu_network_gbps=float(e.get("gpu_network_gbps", 0)),
        nic_mtu=e.get("nic_mtu"),
        boot_disk_type=e.get("boot_disk_type"),
        image=e.get("image"),
        arch=_arch(e, where),
        **_nvlink_domain(e, where, int(e["accelerator_count"])),
    )


def _arch(e: dict, where: str) -> str:
    arch = e.get("arch", "x86_64")
    if arch not in DPKG_ARCH:
        raise CatalogError(f"{where}: arch {arch!r} is not one of {', '.join(DPKG_ARCH)}")
    return arch


def _nvlink_domain(e: dict, where: str, count: int) -> dict:
    """`nvlink_domain` (GPUs) with its own `nvlink_domain_source`: a whole number of nodes."""
    domain = e.get("nvlink_domain")
    if domain is None:
        return {}
    if not isinstance(domain, int) or isinstance(domain, bool) or domain < count or domain % count:
        raise CatalogError(f"{where}: nvlink_domain {domain!r} must be a whole multiple of "
                           f"accelerator_count {count} (GPUs per NVLink domain)")
    source = e.get("nvlink_domain_source")
    if not source:
        raise CatalogError(f"{where}: nvlink_domain needs an nvlink_domain_source")
    unit = e.get("capacity_unit_nodes")
    if unit is not None and (not isinstance(unit, int) or unit < 1 or (domain // count) % unit):
        raise CatalogError(f"{where}: capacity_unit_nodes {unit!r} must divide the domain's "
                           f"{domain // count} nodes")
    return {"nvlink_domain": domain, "nvlink_domain_source": str(source), "capacity_unit_nodes": unit}


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    acc_doc = _read("accelerators.yaml")["accelerators"]
    accelerators = {
        model: Accelerator(
            model=model,
            vendor=_need(e, "vendor", f"accelerators.{model}"),
            kind=_need(e, "kind", f"accelerators.{model}"),
            gres_type=_need(e, "gres_type", f"accelerators.{model}"),
            memory_mib=int(_need(e, "memory_mib", f"accelerators.{model}")),
            bf16_tflops=e.get("bf16_tflops"),
            hbm_bandwidth_gbs=e.get("hbm_bandwidth_gbs"),
            source=_sourced(e, f"accelerators.{model}"),
            fp8_tflops=e.get("fp8_tflops"),
            scale_up_gbs=e.get("scale_up_gbs"),
            scale_up_source=e.get("scale_up_source", ""),
        )
        for model, e in acc_doc.items()
    }
    instance_types: dict[str, dict[str, InstanceType]] = {}
    aliases: dict[str, dict[str, str]] = {}
    images: dict[str, dict[str, str]] = {}
    controllers: dict[str, ControllerType] = {}
    gcp_images: dict[str, GcpImage] = {}
    nic_stacks: dict[str, NicStack] = {}
    for cloud in ("aws", "gcp"):
        doc = _read(f"{cloud}.yaml")
        instance_types[cloud] = {
            name: _instance(cloud, name, e, accelerators) for name, e in doc["instance_types"].items()
        }
        aliases[cloud] = dict(doc.get("aliases", {}))
        for alias, target in aliases[cloud].items():
            if target not in instance_types[cloud]:
                raise CatalogError(f"{cloud}.yaml aliases.{alias}: unknown instance type {target!r}")
        if cloud == "aws":
            for role, e in doc["images"].items():
                _sourced(e, f"aws.yaml images.{role}")
                images[role] = dict(e)
            for name, t in instance_types[cloud].items():
                if t.image is not None and t.image not in images:
                    raise CatalogError(f"aws.yaml instance_types.{name}: unknown image role {t.image!r}")
        else:
            for role, e in doc.get("images", {}).items():
                gcp_images[role] = GcpImage(role, _need(e, "image", f"gcp.yaml images.{role}"),
                                            _sourced(e, f"gcp.yaml images.{role}"))
            for stack, e in doc.get("nic_stacks", {}).items():
                where = f"gcp.yaml nic_stacks.{stack}"
                nic_stacks[stack] = NicStack(stack, _need(e, "lib_dir", where), _sourced(e, where),
                                             e.get("nccl_plugin_image"), e.get("rxdm_image"),
                                             e.get("apt_repository"), tuple(e.get("apt_packages", ())))
            for name, t in instance_types[cloud].items():
                if t.image is not None and t.image not in gcp_images:
                    raise CatalogError(f"gcp.yaml instance_types.{name}: unknown image {t.image!r}")
                if t.gpu_nics and t.gpu_nic_stack not in nic_stacks:
                    raise CatalogError(f"gcp.yaml instance_types.{name}: unknown NIC stack {t.gpu_nic_stack!r}")
        for name, e in doc.get("controller_types", {}).items():
            where = f"{cloud}.yaml controller_types.{name}"
            controllers[name] = ControllerType(name, int(_need(e, "vcpu", where)), int(_need(e, "memory_gib", where)),
                                               float(_need(e, "network_gbps", where)), _sourced(e, where), cloud)
    tpus = {
        name: TpuGeneration(
            name=name,
            hbm_gib_per_chip=float(e["hbm_gib_per_chip"]),
            hbm_bandwidth_gbs=float(e["hbm_bandwidth_gbs"]),
            bf16_tflops=float(e["bf16_tflops"]),
            ici_dims=int(e["ici_dims"]),
            max_chips=int(e["max_chips"]),
            gke_accelerator=e["gke_accelerator"],
            machine_types={int(k): v for k, v in e["machine_types"].items()},
            single_host_topologies=dict(e["single_host_topologies"]),
            topologies=tuple(e["topologies"]),
            source=_sourced(e, f"tpu.yaml tpus.{name}"),
            runtime_version=e.get("runtime_version"),
            ici_gbs_bidirectional=e.get("ici_gbs_bidirectional"),
            ici_source=e.get("ici_source", ""),
            dcn_gbps_per_chip=e.get("dcn_gbps_per_chip"),
            hosts={m: (int(h["vcpu"]), int(h["memory_gib"])) for m, h in (e.get("hosts") or {}).items()},
            host_source=str(e.get("host_source", "")),
            boot_disk_type=e.get("boot_disk_type"),
            fp8_tflops=e.get("fp8_tflops"),
            workload_policy=bool(e.get("workload_policy", False)),
            min_gke_version=e.get("min_gke_version"),
        )
        for name, e in _read("tpu.yaml")["tpus"].items()
    }
    storage = _read("storage.yaml")
    fsx = {
        name: FsxDeploymentType(
            name=name,
            storage_type=e["storage_type"],
            throughput_mbps_per_tib=tuple(e["throughput_mbps_per_tib"]),
            capacity_first=tuple(e["capacity"]["first"]),
            capacity_step=int(e["capacity"]["step"]),
            source=_sourced(e, f"storage.yaml fsx_lustre.{name}"),
            baseline_mbps_per_tib=e.get("baseline_mbps_per_tib"),
            efa_capacity_step_gib={int(k): int(v) for k, v in e.get("efa_capacity_step_gib", {}).items()},
        )
        for name, e in storage["fsx_lustre"].items()
    }
    ml = storage["managed_lustre"]
    ml_source = _sourced(ml, "storage.yaml managed_lustre")
    managed_lustre = {
        int(t): ManagedLustreTier(int(t), int(e["min_capacity_gib"]), ml_source) for t, e in ml["tiers"].items()
    }
    fs_doc = storage.get("filestore", {})
    fs_source = _sourced(fs_doc, "storage.yaml filestore") if fs_doc else ""
    filestore = {
        name: FilestoreTier(name, tuple((int(r["min"]), int(r["max"]), int(r["step"])) for r in e["ranges"]), fs_source)
        for name, e in fs_doc.get("tiers", {}).items()
    }
    return Catalog(accelerators, instance_types, aliases, images, controllers, tpus, fsx, managed_lustre,
                   gcp_images, nic_stacks, filestore)


@dataclass(frozen=True)
class Limit:
    """A documented cloud limit (limits.yaml): the number, pattern or table, and where it is written."""

    name: str
    value: object
    what: str
    source: str


@functools.lru_cache(maxsize=1)
def load_limits() -> Mapping[str, Limit]:
    """The clouds' documented limits (limits.yaml), by name; every entry has a source."""
    return {name: Limit(name, _need(e, "value", f"limits.yaml limits.{name}"), str(e.get("what", "")),
                        _sourced(e, f"limits.yaml limits.{name}"))
            for name, e in _read("limits.yaml")["limits"].items()}


__all__ = ["Accelerator", "Catalog", "CatalogError", "ControllerType", "FilestoreTier", "FsxDeploymentType",
           "GcpImage", "InstanceType", "Limit", "ManagedLustreTier", "NicStack", "TpuGeneration",
           "load_catalog", "load_limits", "load_yaml"]
