"""build_cluster(spec): the whole program, dispatched on cloud x scheduler."""
from __future__ import annotations

import pulumi

from .design import ClusterDesign, design_cluster
from .errors import Problem, SpecError
from .spec import ClusterSpec, parse_spec

CONFIG_KEY = "cluster"   # stack config `aicluster:cluster`


def check_buildable(design: ClusterDesign) -> None:
    """Every cloud x scheduler the spec accepts is built: Slurm or EKS on aws, Slurm or GKE on gcp
    (GPU pools and Cloud TPU slices on both schedulers)."""


def build_cluster(spec: ClusterSpec) -> ClusterDesign:
    design = design_cluster(spec)
    check_buildable(design)
    if design.cloud == "gcp":
        from .gcp.cluster import build_gcp_cluster
        outputs = build_gcp_cluster(design)
    else:
        from .aws.cluster import build_aws_cluster
        outputs = build_aws_cluster(design)
    for key, value in outputs.items():
        pulumi.export(key, value)
    pulumi.export("hostlists", {p.name: p.hostlist for p in design.pools})
    return design


def check_provider_region(spec: ClusterSpec, provider_region: str | None) -> None:
    """The default provider deploys where `aws:region` (`gcp:region`) says; a spec that says
    otherwise would plan one region and build in another."""
    if provider_region and provider_region != spec.region:
        raise SpecError([Problem("region", spec.region, f"the stack's {spec.cloud}:region ({provider_region}); "
                                                        "set both to the same region")])


def program() -> None:
    """The Pulumi program: `__main__.py` and the offline planner both run exactly this."""
    raw = pulumi.Config("aicluster").require_object(CONFIG_KEY)
    source = f"stack {pulumi.get_stack()} config aicluster:cluster"
    try:
        spec = parse_spec(raw, source=source)
        check_provider_region(spec, pulumi.Config(spec.cloud).get("region"))
        build_cluster(spec)
    except SpecError as exc:
        # A clean one-paragraph error in `pulumi up`, not a Python traceback.
        raise pulumi.RunError(str(exc)) from None
