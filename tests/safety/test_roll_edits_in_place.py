"""A `pulumi up` that changes only what a pool's nodes boot (its image, its instance type, so its
user data) changes the pool's launch template and the head's published files, and nothing else:
the nodes move to it through the reconcile loop's roll (docs/operating.md, Rolling updates), never
through a replaced head, filesystem or network.

- AWS: the launch template keeps its URN and its name (no name, no name_prefix: the only inputs
  that force a new template, terraform-provider-aws internal/service/ec2/ec2_launch_template.go
  `name`/`name_prefix` ForceNew); every other input changes in place as a new version ("Launch
  templates are immutable ... Instead, you can create a new version",
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/manage-launch-template-versions.html), made
  the default (update_default_version), and cluster.json carries its latest_version.
- GCP: an instance template is immutable and replaced: with a name_prefix and no
  delete_before_replace, the new one exists before the old one goes, so no launch fails between;
  instances made from the old one run on.
The edits are routine_edits' instance-type edit (AWS: on GCP the machine family decides the GPU NIC
networks) and a pool image edit, on every Slurm stack.
"""
from __future__ import annotations

import copy
import pytest

from tests.support.routine_edits import EDITS, NotApplicable
from tests.support.stack_plans import STACK_NAMES, plan_with_spec, stack_spec_data

SLURM_STACKS = [s for s in STACK_NAMES if stack_spec_data(s).get("scheduler", "slurm") == "slurm"]
# Inputs each type may change in place in such an edit (the published files, the alert rules
# whose thresholds follow the pool's hardware).
IN_PLACE = {
    "aws:s3/bucketObjectv2:BucketObjectv2": {"content", "source", "contentBase64"},
    "gcp:storage/bucketObject:BucketObject": {"content", "source"},
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": {"data"},
    "gcp:monitoring/alertPolicy:AlertPolicy": {"conditions", "documentation"},
}
TEMPLATE_TYPES = {"aws": "aws:ec2/launchTemplate:LaunchTemplate", "gcp": "gcp:compute/instanceTemplate:InstanceTemplate"}
IMAGES = {"aws": "ami-0123456789abcdef0", "gcp": "projects/my-project/global/images/my-node-image-2"}


def _instance_type(spec: dict):
    if spec["cloud"] == "gcp":
        # The machine family decides the GPU NICs, so their VPCs (design gcp_nics): another type is
        # another fabric, not a node edit. The image edit stands for GCP.
        raise NotApplicable("on GCP another machine type brings other GPU NIC networks")
    edit = next(e for e in EDITS if e.id == "instance-type")
    return edit.make(spec)


def _image(spec: dict):
    before, after = copy.deepcopy(spec), copy.deepcopy(spec)
    if "tpu" in after["pools"][0]:
        raise NotApplicable("pools[0] is a TPU pool: Pulumi's, not launched from a template")
    after["pools"][0]["image"] = IMAGES[spec["cloud"]]
    return before, after


def _changed(before, after) -> list[tuple]:
    old = {r.urn: r for r in before.resources}
    out = []
    for resource in after.resources:
        previous = old.get(resource.urn)
        if previous is None:
            out.append((resource, ["<new>"]))
            continue
        keys = sorted(k for k in set(previous.inputs) | set(resource.inputs)
                      if previous.inputs.get(k) != resource.inputs.get(k))
        if keys:
            out.append((resource, keys))
    gone = set(old) - {r.urn for r in after.resources}
    out += [(old[urn], ["<gone>"]) for urn in gone]
    return out


@pytest.mark.parametrize("make", [_instance_type, _image], ids=["instance-type", "image"])
@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_a_node_edit_changes_only_the_pool_template_and_the_published_files(stack, make):
    spec = stack_spec_data(stack)
    try:
        before_spec, after_spec = make(spec)
    except NotApplicable as reason:
        pytest.skip(str(reason))
    before, after = plan_with_spec(stack, before_spec), plan_with_spec(stack, after_spec)
    cloud, pool = spec["cloud"], after_spec["pools"][0]["name"]
    template_type = TEMPLATE_TYPES[cloud]
    changed = _changed(before, after)
    templates = [(r, keys) for r, keys in changed if r.type == template_type]
    assert [r.name for r, _ in templates] == [next(r.name for r in after.resources if r.type == template_type
                                                   and r.name.endswith(f"-{pool}-template"))], changed
    template, keys = templates[0]
    assert "<new>" not in keys and "<gone>" not in keys         # the same URN
    if cloud == "aws":
        assert not {"name", "namePrefix"} & set(keys), keys     # updated in place: a new version
        assert template.inputs.get("updateDefaultVersion") is True
    else:
        assert template.inputs.get("namePrefix") and not template.delete_before_replace
    others = [(r.type, r.name, keys) for r, keys in changed
              if r.type != template_type and not set(keys) <= IN_PLACE.get(r.type, set())]
    assert not others, f"{stack}: more than the template and the published files change: {others}"


@pytest.mark.parametrize("stack", [s for s in SLURM_STACKS if stack_spec_data(s)["cloud"] == "aws"])
def test_cluster_json_carries_each_pools_version_and_budget(stack):
    """The version the resume program launches and the roll moves to: the template's latest_version
    (the offline fake cloud's is 1), and max_unavailable in nodes."""
    import json

    plan = plan_with_spec(stack, stack_spec_data(stack))
    published = next(r for r in plan.resources if r.name.endswith("-cluster-json"))
    pools = json.loads(published.inputs["content"])["pools"]
    spec_pools = {p["name"]: p for p in stack_spec_data(stack)["pools"]}
    for name, pool in pools.items():
        assert pool["version"] == "1", pool
        assert isinstance(pool["max_unavailable"], int) and 1 <= pool["max_unavailable"] <= spec_pools[name]["max_nodes"]
