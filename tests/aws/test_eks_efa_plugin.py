"""The EFA device plugin schedules on every EFA type aicluster supports (issue 11).

aws-efa-k8s-device-plugin's DaemonSet has a required node affinity built from its values
(stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml in aws/eks-charts):

    nodeSelectorTerms:
      {{- range .Values.supportedInstanceLabels.keys }}
      - matchExpressions:
        - key: {{ . }}
          operator: In
          values: {{ toYaml $.Values.supportedInstanceLabels.values }}
      {{- end }}
        - key: eks.amazonaws.com/compute-type
          operator: NotIn
          values: [auto]

v0.5.7's default list stopped at p5en, so its pods never ran on p6-b200 and those nodes advertised
no vpc.amazonaws.com/efa. aicluster now pins a current chart and passes the catalog's EFA types.
"""
from __future__ import annotations

import copy
import re

import pytest

from aicluster.aws.eks_addons import INSTANCE_TYPE_NODE_LABEL, chart_values, efa_device_plugin_values
from aicluster.catalog import load_catalog
from aicluster.design.cluster import design_cluster
from aicluster.design.kubernetes import versions
from aicluster.offline.capture import reveal
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC

CHART = "aws-efa-k8s-device-plugin"
EFA_TYPES = sorted(t.name for t in load_catalog().instance_types["aws"].values() if t.efa_capable)


def rendered_affinity(values: dict) -> list[dict]:
    """The chart template's nodeSelectorTerms for these values (see the module docstring)."""
    labels = values["supportedInstanceLabels"]
    return [{"matchExpressions": [{"key": key, "operator": "In", "values": list(labels["values"])},
                                  {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn",
                                   "values": ["auto"]}]}
            for key in labels["keys"]]


def admits(terms: list[dict], node_labels: dict) -> bool:
    """Kubernetes node affinity: any term whose every expression matches."""
    def match(e):
        present = e["key"] in node_labels
        if e["operator"] == "In":
            return present and node_labels[e["key"]] in e["values"]
        return not present or node_labels[e["key"]] not in e["values"]
    return any(all(match(e) for e in t["matchExpressions"]) for t in terms)


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", v).groups())


def test_chart_is_newer_than_the_release_that_learnt_p6_b200():
    chart = versions().charts[CHART]
    assert version_tuple(chart.version) >= version_tuple("v0.5.9")
    assert "checked on 2026-11-23" in chart.source and "supportedInstanceLabels" in chart.source


@pytest.mark.parametrize("itype", EFA_TYPES)
def test_every_efa_type_of_the_catalog_is_in_the_rendered_affinity(itype):
    terms = rendered_affinity(efa_device_plugin_values())
    assert admits(terms, {INSTANCE_TYPE_NODE_LABEL: itype})


def test_affinity_list_is_exactly_the_catalog_and_p6_b200_is_in_it():
    values = efa_device_plugin_values()
    assert values["supportedInstanceLabels"] == {"keys": ["node.kubernetes.io/instance-type"], "values": EFA_TYPES}
    assert "p6-b200.48xlarge" in EFA_TYPES
    # Still only on EFA nodes, tolerating the GPU taint.
    assert values["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]


def test_a_p6_b200_cluster_installs_the_plugin_with_the_catalog_list(plan_spec):
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"},
                pools=[{"name": "b200", "instance_type": "p6-b200.48xlarge", "max_nodes": 2}])
    assert "p6-b200.48xlarge" in chart_values(design_cluster(parse_spec(spec)))[CHART][
        "supportedInstanceLabels"]["values"]
    (release,) = [r for r in plan_spec(spec).of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == CHART]
    i = reveal(release.inputs)
    assert i["version"] == versions().charts[CHART].version
    terms = rendered_affinity(i["values"])
    assert admits(terms, {INSTANCE_TYPE_NODE_LABEL: "p6-b200.48xlarge", "vpc.amazonaws.com/efa.present": "true"})
