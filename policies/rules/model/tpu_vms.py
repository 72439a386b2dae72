"""GCP pools from Cloud TPU VMs (`gcp:tpu/v2Vm`): one slice each, its hosts are the nodes."""
from __future__ import annotations

import re
from typing import Any, Mapping

from aicluster.catalog import load_catalog

from .._props import POOL, get
from .cluster import Fabric, Placement, Pool
from .common import config_nodes, gcp_zone, hints
from .index import Index
from .kinds import CONFIG_SOURCE, TPU_VM
from .tpu import hosts, topology_chips, tpu_instance

_TPU_TYPE = re.compile(r"^(v\d+[a-z]*|v5litepod)-(\d+)$")  # v5p-128, v5litepod-16, v6e-8
_TPU_CONFIG_TYPES = {"V4": "v4", "V5P": "v5p", "V5LITE_POD": "v5e", "V6E": "v6e"}
_TPU_PREFIX = {"v4": "v4", "v5p": "v5p", "v5litepod": "v5e", "v5e": "v5e", "v6e": "v6e"}
_TPU_CORES_PER_CHIP = {"v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}   # the type suffix counts TensorCores (Cloud TPU docs, TPU versions)


def _from_accelerator_type(accel: Any) -> tuple[str | None, int | None]:
    """(generation, chips) of an acceleratorType such as v5p-128 (a count of TensorCores)."""
    m = _TPU_TYPE.match(accel) if isinstance(accel, str) else None
    gen_name = _TPU_PREFIX.get(m.group(1)) if m else None
    if gen_name is None:
        return None, None
    return gen_name, int(m.group(2)) // _TPU_CORES_PER_CHIP[gen_name]


def _slice(p: Mapping) -> tuple[str | None, int | None]:
    """(generation, chips): from acceleratorType, else from acceleratorConfig type and topology."""
    gen_name, chips = _from_accelerator_type(get(p, "acceleratorType"))
    cfg_type = get(p, "acceleratorConfig", "type")
    if gen_name is None and isinstance(cfg_type, str):
        return _TPU_CONFIG_TYPES.get(cfg_type.upper()), topology_chips(get(p, "acceleratorConfig", "topology"))
    return gen_name, chips


def _pool(config: Mapping[str, Any], r: Any, p: Mapping, tags: Mapping[str, str]) -> Pool | None:
    gen_name, chips = _slice(p)
    gen = load_catalog().tpus.get(gen_name or "")
    if gen is None or not chips:
        return None
    n_hosts, per_host = hosts(gen, chips)
    key = tags.get(POOL) or r.name
    nodes = config_nodes(config, key, r.name)
    return Pool(key=key, cloud="gcp", anchor=r,
                instance=tpu_instance(gen, per_host, f"tpu-{gen.name} ({chips} chips)"),
                instance_types=(f"tpu-{gen.name}",), nodes=nodes if nodes is not None else n_hosts,
                nodes_source=CONFIG_SOURCE if nodes is not None else f"{chips} chips / {per_host} per host",
                fabric=Fabric(layout="ici", detail="TPU ICI"), placement=Placement(strategy="ici"),
                zones=gcp_zone(get(p, "zone")), hints=hints(tags), tpu=True, members=[r])


def find(ix: Index, config: Mapping[str, Any]) -> list[Pool]:
    pools = [_pool(config, r, ix.props(r), ix.tags(r)) for r in ix.of(TPU_VM)]
    return [p for p in pools if p is not None]
