"""Priorities and teams on Kueue: the WorkloadPriorityClasses, one ClusterQueue per team in the
cluster's cohort with the team's guaranteed nodes as its quota (the training namespace's queue keeps
the rest), one LocalQueue per namespace, preemption by priority; every object valid against the
pinned Kueue release's CRDs, and `kubernetes.teams` checked by the spec."""
from __future__ import annotations

import copy

import jsonschema
import pytest
import yaml

from aicluster.errors import SpecError
from aicluster.design.kubernetes import (BORROW_PREEMPTS_UP_TO, DEFAULT_PRIORITY, EXAMPLES_CONFIGMAP, PRIORITY_LABEL,
                                         WORKLOAD_PRIORITIES, versions)
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, GCP_MIN, run_spec
from tests.support.manifests import rendered_manifests, validate

KUEUE = versions().charts["kueue"].api_version
CQ, LQ = f"kubernetes:{KUEUE}:ClusterQueue", f"kubernetes:{KUEUE}:LocalQueue"
WPC = f"kubernetes:{KUEUE}:WorkloadPriorityClass"
POOLS = [{"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 12, "min_nodes": 4},
         {"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 3}]
TEAMS = [{"name": "research", "nodes": {"h100": 8}}, {"name": "eval", "nodes": {"h100": 2, "a100": 1}},
         {"name": "interns"}]


def team_spec(teams=TEAMS, pools=POOLS) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", pools=copy.deepcopy(pools),
                kubernetes={"api_access": "vpc", "teams": copy.deepcopy(teams)})
    return spec


@pytest.fixture(scope="module")
def plan():
    return run_spec(team_spec())


def quotas(queue) -> dict[str, dict[str, str]]:
    (group,) = queue.inputs["spec"]["resourceGroups"]
    for flavor in group["flavors"]:    # the CRD's CEL rule: every flavor lists the covered resources, in order
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    return {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}


def test_default_priority_classes(plan):
    classes = {c.inputs["metadata"]["name"]: c.inputs for c in plan.of_type(WPC)}
    assert {n: c["value"] for n, c in classes.items()} == {"preemptible": -1000, "training": 0, "critical": 1000}
    # A job without the label gets priority 0 from Kueue: the default class is that value.
    assert classes[DEFAULT_PRIORITY]["value"] == 0
    assert all(c["description"] and "spec" not in c for c in classes.values())
    assert BORROW_PREEMPTS_UP_TO == classes["preemptible"]["value"]


def test_one_queue_per_namespace_all_in_the_cohort(plan):
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in plan.of_type(CQ)}
    assert set(queues) == {"demo", "demo-research", "demo-eval", "demo-interns"}
    assert {spec["cohortName"] for spec in queues.values()} == {"demo"}
    for spec in queues.values():
        assert spec["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                      "borrowWithinCohort": {"policy": "LowerPriority",
                                                             "maxPriorityThreshold": BORROW_PREEMPTS_UP_TO}}
    locals_ = {q.inputs["metadata"]["namespace"]: q.inputs for q in plan.of_type(LQ)}
    assert set(locals_) == {"training", "research", "eval", "interns"}
    for namespace, local in locals_.items():
        assert local["metadata"]["name"] == "default"
        # Each LocalQueue feeds the ClusterQueue that selects its namespace, and only that one.
        spec = queues[local["spec"]["clusterQueue"]]
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": namespace}}


def test_team_quotas_are_their_nodes_and_the_cohort_is_the_pools(plan):
    queues = {q.inputs["metadata"]["name"]: quotas(q) for q in plan.of_type(CQ)}
    from aicluster.catalog import load_catalog

    p5 = load_catalog().resolve("aws", "p5.48xlarge")
    assert queues["demo-research"]["h100"]["nvidia.com/gpu"] == str(8 * p5.accelerator_count)
    assert queues["demo-research"]["a100"]["nvidia.com/gpu"] == "0"         # listed: it may borrow them
    assert queues["demo-eval"]["a100"]["nvidia.com/gpu"] == "8"
    assert queues["demo-interns"]["h100"]["cpu"] == "0"
    assert queues["demo"]["h100"]["nvidia.com/gpu"] == str(2 * p5.accelerator_count)    # 12 - 8 - 2
    assert queues["demo"]["a100"]["nvidia.com/gpu"] == "16"                             # 3 - 1 nodes of 8
    # Every queue together holds exactly the pools at max_nodes: nothing admitted beyond the nodes.
    for pool in POOLS:
        gpus = sum(int(q[pool["name"]]["nvidia.com/gpu"]) for q in queues.values())
        assert gpus == pool["max_nodes"] * load_catalog().resolve("aws", pool["instance_type"]).accelerator_count


def test_team_namespaces_come_before_their_queues(plan):
    namespaces = {n.inputs["metadata"]["name"]: n for n in plan.of_type("kubernetes:core/v1:Namespace")}
    assert {"training", "research", "eval", "interns"} <= set(namespaces)
    for local in plan.of_type(LQ):
        namespace = local.inputs["metadata"]["namespace"]
        assert namespaces[namespace].urn in local.dependencies or namespace == "training"


def test_adding_a_team_keeps_the_training_queues_resources():
    """The training queue's resources keep their names, so adding a team updates them in place."""
    def names(p):
        return {r.name for r in p.resources if r.type in (CQ, LQ)}

    alone, with_teams = run_spec(team_spec(teams=[])), run_spec(team_spec())
    assert names(alone) < names(with_teams)


def test_every_team_object_validates_against_the_kueue_crds(plan):
    from aicluster.commands.planner import rendered_files

    manifests = rendered_manifests(rendered_files(plan))
    kinds = [d["kind"] for docs in manifests.values() for d in docs]
    assert kinds.count("LocalQueue") == 4 and kinds.count("WorkloadPriorityClass") == 3
    for docs in manifests.values():
        for doc in docs:
            validate(doc)


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(value="1000"),                            # an int32, not a string
    lambda d: d.update(spec={"value": 1000}),                    # top-level, not under spec
    lambda d: d.update(apiVersion="kueue.x-k8s.io/v1beta1"),     # the deprecated version
])
def test_validation_catches_a_broken_priority_class(plan, mutate):
    from aicluster.commands.planner import rendered_files

    doc = yaml.safe_load(rendered_files(plan)["k8s/cluster/workloadpriorityclass-critical.yaml"])
    validate(doc)
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


@pytest.mark.parametrize("mutate", [
    lambda q: q["spec"].update(cohort=q["spec"].pop("cohortName")),          # v1beta1's name for it
    lambda q: q["spec"]["preemption"].update(withinClusterQueue="Always"),
    lambda q: q["spec"]["preemption"]["borrowWithinCohort"].update(maxPriorityThreshold="low"),
    lambda q: q["spec"].update(admissionChecks=["provisioning"]),            # gone in v1beta2
])
def test_validation_catches_a_broken_team_queue(plan, mutate):
    from aicluster.commands.planner import rendered_files

    queue = yaml.safe_load(rendered_files(plan)["k8s/cluster/clusterqueue-demo-research.yaml"])
    validate(queue)
    mutate(queue)
    with pytest.raises(jsonschema.ValidationError):
        validate(queue)


def test_example_jobs_run_at_the_default_priority(plan):
    (cm,) = [c for c in plan.of_type("kubernetes:core/v1:ConfigMap") if c.inputs["metadata"]["name"] == EXAMPLES_CONFIGMAP]
    jobs = [d for key, text in cm.inputs["data"].items() if key.endswith(".yaml")
            for d in yaml.safe_load_all(text) if d and d["kind"] in ("Job", "JobSet")]
    assert jobs
    assert all(j["metadata"]["labels"][PRIORITY_LABEL] == DEFAULT_PRIORITY for j in jobs)
    assert DEFAULT_PRIORITY in {p.name for p in WORKLOAD_PRIORITIES}


def test_plan_lists_the_teams(plan):
    from aicluster.aws.eks_report import kubernetes_lines
    from aicluster.design.cluster import design_cluster

    lines = "\n".join(kubernetes_lines(design_cluster(parse_spec(team_spec()))))
    assert "cohort demo" in lines and "preemptible (-1000), training (0), critical (1000)" in lines
    assert "team research: LocalQueue research/default -> ClusterQueue demo-research (h100 8)" in lines
    assert "team interns: LocalQueue interns/default -> ClusterQueue demo-interns (no guaranteed nodes)" in lines


@pytest.mark.parametrize("teams, path, words", [
    ([{"name": "training"}], "kubernetes.teams[0].name", "training namespace"),
    ([{"name": "kube-system"}], "kubernetes.teams[0].name", "Kubernetes namespace"),
    ([{"name": "kueue-system"}], "kubernetes.teams[0].name", "kueue chart"),
    ([{"name": "a"}, {"name": "a"}], "kubernetes.teams[1].name", "the team at kubernetes.teams[0]"),
    ([{"name": "a", "nodes": {"h200": 1}}], "kubernetes.teams[0].nodes.h200", "a pool of this spec"),
    ([{"name": "a", "nodes": {"h100": 8}}, {"name": "b", "nodes": {"h100": 5}}], "kubernetes.teams",
     "max_nodes (12)"),
    ([{"name": "a", "nodes": {"h100": -1}}], "kubernetes.teams[0].nodes.h100", ""),
    ([{"name": "Research"}], "kubernetes.teams[0].name", ""),
    ([{"name": "a", "nodes": {f"p{i}": 1 for i in range(65)}}], "kubernetes.teams[0].nodes", "at most 64"),
    ([{"name": f"t{i}"} for i in range(33)], "kubernetes.teams", "at most 32"),
])
def test_spec_refuses_a_bad_team(teams, path, words):
    with pytest.raises(SpecError) as info:
        parse_spec(team_spec(teams=teams))
    problems = [p for p in info.value.problems if p.path == path]
    assert problems, info.value.problems
    assert words in problems[0].allowed


def test_spec_refuses_teams_on_slurm():
    spec = copy.deepcopy(BASE_SPEC)
    spec["kubernetes"] = {"teams": [{"name": "research"}]}
    with pytest.raises(SpecError, match="kubernetes"):
        parse_spec(spec)


def test_tpu_teams_get_whole_slices():
    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=[{"name": "v5p", "tpu": {"type": "v5p", "topology": "4x4x4"},
                                                "max_nodes": 32}])
    spec["kubernetes"] = {"teams": [{"name": "jax", "nodes": {"v5p": 8}}]}
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    assert any(p.path == "kubernetes.teams[0].nodes.v5p" and "multiple of 16" in p.allowed
               for p in info.value.problems)
    spec["kubernetes"]["teams"][0]["nodes"]["v5p"] = 16
    plan = run_spec(spec)
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"]["resourceGroups"] for q in plan.of_type(CQ)}
    (tpu_group,) = queues[f"{spec['name']}-jax"]
    assert tpu_group["flavors"][0]["resources"] == [{"name": "google.com/tpu", "nominalQuota": "64"}]
