"""Specs with their `on_delete` policies set (tests/safety, spec/teardown.py)."""
from __future__ import annotations

import copy

from aicluster.spec.cluster import parse_spec
from aicluster.spec.teardown import storage_backup


def with_policy(spec: dict, policy: str) -> dict:
    """Every on_delete of the spec set to `policy`, or to delete where the kind has no snapshot."""
    spec = copy.deepcopy(spec)
    parsed = parse_spec(spec)
    for fs, parsed_fs in zip(spec.get("storage") or [], parsed.storage):
        if fs.get("protect", True):
            fs["on_delete"] = "delete" if policy == "snapshot" and storage_backup(spec["cloud"], parsed_fs) else policy
    if spec.get("scheduler", "slurm") == "slurm":
        slurm = spec.setdefault("slurm", {})
        if slurm.get("accounting") == "managed":
            slurm["accounting_on_delete"] = policy
        slurm.setdefault("head_node", {})["on_delete"] = "delete" if policy == "snapshot" else policy
    spec.setdefault("monitoring", {})["on_delete"] = "delete" if policy == "snapshot" else policy
    return spec
