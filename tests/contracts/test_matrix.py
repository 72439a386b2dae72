"""The matrix covers what it promises, and limits.yaml holds together: every catalog instance type,
every capacity type of each cloud, both schedulers on both clouds and TPUs on GKE and Slurm are
planned by some variant; the per-card interface table agrees with moto's copy of
DescribeInstanceTypes; every limit has a source."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import pytest
import yaml

from aicluster import catalog as catalog_module
from aicluster.catalog import CatalogError, load_catalog, load_limits
from tests.support.catalog import NOT_IN_MOTO
from tests.support.contract_plans import CAPACITIES, TPU_CAPACITIES, refused, variants

CATALOG = load_catalog()


def _covered(predicate) -> list[str]:
    return [v.id for v in variants() if predicate(v)]


@pytest.mark.parametrize("cloud, name", [(c, n) for c in ("aws", "gcp") for n in CATALOG.instance_types[c]])
def test_every_catalog_instance_type_is_planned(cloud, name):
    assert _covered(lambda v: v.cloud == cloud and name in v.instance_types), \
        f"no planned variant has {name}; refused: {[r for r in refused() if name in r[0]]}"


@pytest.mark.parametrize("cloud, capacity", [(c, k) for c in CAPACITIES for k in CAPACITIES[c]])
def test_every_capacity_type_is_planned(cloud, capacity):
    assert _covered(lambda v: v.cloud == cloud and v.accelerator != "tpu" and capacity in v.capacities)


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_every_cloud_and_scheduler_is_planned(cloud, scheduler):
    assert _covered(lambda v: v.cloud == cloud and v.scheduler == scheduler and v.accelerator != "tpu")


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
def test_tpus_are_planned_on_both_schedulers(scheduler):
    planned = _covered(lambda v: v.accelerator == "tpu" and v.scheduler == scheduler)
    assert planned
    for capacity in TPU_CAPACITIES:
        assert _covered(lambda v: v.accelerator == "tpu" and v.scheduler == scheduler and capacity in v.capacities)


def test_every_stack_is_planned_as_written_and_at_the_spec_limits():
    ids = {v.id for v in variants()}
    stacks = {v.stack for v in variants()}
    assert all(s in ids and f"{s}+max" in ids for s in stacks)


def test_refused_edits_are_only_what_the_spec_documents():
    """A matrix edit the spec refuses must be refused for a documented reason (scheduler support),
    never for something the variant builder got wrong."""
    allowed = ("EKS", "Slurm's node lines need them")
    wrong = [(vid, why) for vid, why in refused() if not any(a in why for a in allowed)]
    assert not wrong, wrong


# --- limits.yaml --------------------------------------------------------------------------------

MOTO_TYPES = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"


def test_interfaces_per_card_match_describe_instance_types():
    moto_types = json.loads(gzip.open(MOTO_TYPES).read())
    table = load_limits()["ec2_interfaces_per_card"].value
    assert set(table) == set(CATALOG.instance_types["aws"]), "one entry per catalog AWS type"
    for name, per_card in table.items():
        if name in NOT_IN_MOTO:
            continue            # sourced elsewhere (tests/test_catalog.py NOT_IN_MOTO)
        cards = moto_types[name]["NetworkInfo"]["NetworkCards"]
        assert {c["MaximumNetworkInterfaces"] for c in cards} == {per_card}, name
        efa = moto_types[name]["NetworkInfo"].get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
        assert efa == CATALOG.instance_types["aws"][name].max_efa_interfaces, name


def test_every_limit_has_a_source_and_a_value():
    for name, limit in load_limits().items():
        assert limit.source.strip() and limit.value is not None and limit.what, name


@pytest.mark.parametrize("how", ["missing", "blank"])
def test_loader_refuses_a_limit_without_source(tmp_path, monkeypatch, how):
    doc = yaml.safe_load((catalog_module._HERE / "limits.yaml").read_text(encoding="utf-8"))
    entry = doc["limits"]["ec2_user_data_bytes"]
    if how == "missing":
        del entry["source"]
    else:
        entry["source"] = "  "
    (tmp_path / "limits.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    monkeypatch.setattr(catalog_module, "_HERE", tmp_path)
    load_limits.cache_clear()
    try:
        with pytest.raises(CatalogError, match="source"):
            load_limits()
    finally:
        monkeypatch.undo()
        load_limits.cache_clear()
    assert load_limits()["ec2_user_data_bytes"].source
