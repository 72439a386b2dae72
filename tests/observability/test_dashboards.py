"""Grafana dashboards of every stack: every panel query is valid PromQL (promtool parses each as a
recording rule), the files are well-formed dashboards, and their thresholds are the alerts'."""
from __future__ import annotations

import json

import pytest

from aicluster.catalog.observability import contracts, metrics
from aicluster.render.dashboards import dashboard_files, dashboards, queries
from aicluster.design.cluster import design_cluster
from aicluster.design.observability import monitoring_design
from aicluster.spec.cluster import parse_spec
from tests.support import STACK_NAMES, stack_spec
from tests.support.prometheus import check_rules, queries_as_rules


def _watch(name: str):
    return monitoring_design(design_cluster(parse_spec(stack_spec(name))))


@pytest.mark.parametrize("name", STACK_NAMES)
def test_every_dashboard_query_parses(name, tmp_path):
    exprs = [q for board in dashboards(_watch(name)).values() for q in queries(board)]
    assert len(exprs) >= 10
    path = tmp_path / "queries.yaml"
    path.write_text(queries_as_rules(exprs))
    run = check_rules(path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_query_that_does_not_parse_fails(tmp_path):
    path = tmp_path / "queries.yaml"
    path.write_text(queries_as_rules(["sum by (node) (rate(node_cpu_seconds_total[5m])"]))
    assert check_rules(path).returncode != 0


@pytest.mark.parametrize("name", STACK_NAMES)
def test_dashboards_are_importable_json(name):
    files = dashboard_files(_watch(name))
    uids = set()
    for path, text in files.items():
        board = json.loads(text)
        assert len(board["uid"]) <= 40 and board["uid"] not in uids, path
        uids.add(board["uid"])
        assert board["templating"]["list"][0]["type"] == "datasource"
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}"
            assert all("$" not in t["expr"] for t in panel["targets"]), panel["title"]
    views = {p.rsplit("/", 1)[1] for p in files}
    assert {"overview.json", "pools.json", "storage.json", "jobs.json"} <= views


def test_gpu_stack_has_every_view_and_the_alerts_thresholds():
    watch = _watch("aws-p5-slurm")
    boards = dashboards(watch)
    assert {p.rsplit("/", 1)[1] for p in boards} == {"overview.json", "pools.json", "gpus.json", "fabric.json",
                                                       "storage.json", "jobs.json"}
    fabric = boards["monitoring/grafana/fabric.json"]["panels"][0]
    steps = fabric["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == watch.fabric_pools[0].fabric_threshold.value == 800


def test_queries_name_only_catalogued_series():
    """Every aicluster_/DCGM_/node_/slurm_/kueue_/kube_ series a panel reads is in the one list."""
    import re
    known = {m.name for m in metrics()} | {c.name for c in contracts()}
    from aicluster.catalog.observability import fabric
    known |= {getattr(fabric(k), d) for k in ("efa", "rdma", "gvnic") for d in ("rx", "tx")}
    for name in STACK_NAMES:
        for board in dashboards(_watch(name)).values():
            for q in queries(board):
                for series in re.findall(r"\b((?:aicluster_|DCGM_|node_|slurm_|kueue_|kube_)[A-Za-z0-9_]+)", q):
                    assert series in known, (name, q)
