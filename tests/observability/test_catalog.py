"""The one list (catalog/observability.yaml): every exporter pinned and sourced, the metrics the
rules read are the DCGM counters the exporter is told to collect."""
from __future__ import annotations

import pytest
import yaml

from aicluster.catalog import CatalogError
from aicluster.catalog import observability as obs


def test_every_exporter_is_pinned_sourced_and_dated():
    found = obs.exporters()
    assert {"dcgm_exporter", "node_exporter", "slurm_exporter", "kueue", "kube_state_metrics"} <= set(found)
    for e in found.values():
        assert e.source and e.checked and e.port
    assert found["dcgm_exporter"].pin.startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert "@v" in found["slurm_exporter"].pin


def test_the_dcgm_counters_hold_every_field_the_rules_read():
    counters = set(obs.exporters()["dcgm_exporter"].counters)
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_UTIL"} <= counters
    for m in obs.metrics():
        if m.exporter == "dcgm_exporter":
            assert m.name in counters


def test_scrape_settings():
    s = obs.scrape()
    assert s.timeout_s < s.interval_s and {"cluster", "pool", "node"} <= set(s.target_labels)


@pytest.mark.parametrize("section, key", [("exporters", "node_exporter"), ("contracts", "tokens_per_second"),
                                          ("fabric", "efa")])
def test_loader_refuses_an_entry_without_source(monkeypatch, section, key):
    doc = yaml.safe_load(obs._FILE.read_text())
    del doc[section][key]["source"]
    for cached in (obs._doc, obs.exporters, obs._metrics, obs._fabric, obs._contracts, obs.scrape):
        cached.cache_clear()
    monkeypatch.setattr(obs, "_doc", lambda: doc)
    try:
        with pytest.raises(CatalogError, match="source"):
            {"exporters": obs.exporters, "contracts": obs._contracts, "fabric": obs._fabric}[section]()
    finally:
        for cached in (obs.exporters, obs._metrics, obs._fabric, obs._contracts, obs.scrape):
            cached.cache_clear()
