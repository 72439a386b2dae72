"""A GB200 NVL72-shaped instance type for tests, until the catalog carries the real ones: derived
from a catalog entry (p5.48xlarge on AWS, a3-megagpu-8g on GCP) with 4 GPUs a node and a 72-GPU
NVLink domain (18 nodes; AWS also sells 9-node UltraServers), as tests/test_nvl72_capacity.py does,
and the specs of clusters made of such pools (one domain a pool, every node static)."""
from __future__ import annotations

import copy
import dataclasses
from contextlib import contextmanager

import pytest

from aicluster.catalog import load_catalog
from tests.support import AWS_MIN, GCP_MIN

NVL = "nvl72-test.36xlarge"
AWS_BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
GCP_RESERVATION = {"type": "reservation", "reservation_id": "a4x-reservation"}
_BASES = {"aws": ("p5.48xlarge", 9), "gcp": ("a3-megagpu-8g", None)}


@contextmanager
def nvl72_type():
    """The derived type in both clouds' tables of the (cached) catalog while the block runs."""
    cat = load_catalog()
    with pytest.MonkeyPatch.context() as patch:
        for cloud, (base, unit) in _BASES.items():
            derived = dataclasses.replace(cat.instance_types[cloud][base], name=NVL, accelerator_count=4,
                                          nvlink_domain=72, nvlink_domain_source="test", capacity_unit_nodes=unit)
            patch.setitem(cat.instance_types[cloud], NVL, derived)
        yield cat.instance_types


def nvl72_spec(cloud: str = "aws", domains: tuple[int, ...] = (18, 18), partition: str = "gb200",
               others: tuple[dict, ...] = (), name: str = "nvl") -> dict:
    """A cluster of one pool per NVLink domain (gb200a, gb200b, ... of `domains` nodes each, all
    static, in one partition), then the pools `others`."""
    data = copy.deepcopy(AWS_MIN if cloud == "aws" else GCP_MIN)
    data["name"] = name
    capacity = AWS_BLOCK if cloud == "aws" else GCP_RESERVATION
    data["pools"] = [{"name": f"gb200{chr(ord('a') + k)}", "instance_type": NVL, "max_nodes": nodes,
                      "min_nodes": nodes, "partition": partition, "capacity": dict(capacity)}
                     for k, nodes in enumerate(domains)] + [copy.deepcopy(p) for p in others]
    return data
