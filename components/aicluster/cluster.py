"""build_cluster(spec): the whole program, dispatched on cloud x scheduler."""
from __future__ import annotations

import pulumi

from aicluster.design.model import ClusterDesign
from aicluster.design.cluster import design_cluster
from aicluster.errors import Problem, SpecError
from aicluster.spec.cluster import ClusterSpec, parse_spec

CONFIG_KEY = "cluster"   # stack config `aicluster:cluster`


# What build_cluster builds per cloud: the Kubernetes platform and the filesystem kinds.
_PLATFORM = {"aws": "eks", "gcp": "gke"}
_STORAGE_KINDS = {"aws": ("fsx-lustre", "efs"), "gcp": ("managed-lustre", "filestore")}


def check_buildable(design: ClusterDesign) -> None:
    """Every cloud x scheduler the spec accepts is built: Slurm or EKS on aws, Slurm or GKE on gcp
    (GPU pools and Cloud TPU slices on both schedulers). A design outside that (a hand-made or
    edited ClusterDesign, or a design step that drifts from the builders) raises SpecError here,
    before any resource is declared, instead of building half a cluster: the cloud's builder must
    exist, the scheduler must have its design (Slurm, or Kubernetes on the cloud's own platform),
    TPU slices are gcp only, and every filesystem must be a kind the cloud's builder creates."""
    problems: list[Problem] = []
    if design.cloud not in _PLATFORM:
        raise SpecError([Problem("cloud", design.cloud, " or ".join(_PLATFORM))])
    if design.scheduler == "slurm":
        if design.slurm is None or design.kubernetes is not None:
            problems.append(Problem("slurm", design.slurm,
                                    "a Slurm design, and no Kubernetes design, for scheduler slurm"))
    elif design.scheduler == "kubernetes":
        platform = design.kubernetes.platform if design.kubernetes else None
        if platform != _PLATFORM[design.cloud] or design.slurm is not None:
            problems.append(Problem("kubernetes", platform, f"a {_PLATFORM[design.cloud]} design, and no Slurm "
                                                            f"design, for scheduler kubernetes on {design.cloud}"))
    else:
        problems.append(Problem("scheduler", design.scheduler, "slurm or kubernetes"))
    for i, pool in enumerate(design.pools):
        if pool.tpu is not None and design.cloud != "gcp":
            problems.append(Problem(f"pools[{i}].tpu", pool.tpu.name, "a Cloud TPU slice on gcp only"))
    for i, fs in enumerate(design.storage):
        if fs.kind not in _STORAGE_KINDS[design.cloud]:
            problems.append(Problem(f"storage[{i}]", fs.kind, f"{' or '.join(_STORAGE_KINDS[design.cloud])} "
                                                              f"on {design.cloud}"))
    if problems:
        raise SpecError(problems)


def build_cluster(spec: ClusterSpec) -> ClusterDesign:
    design = design_cluster(spec)
    check_buildable(design)
    if design.cloud == "gcp":
        from aicluster.gcp.cluster import build_gcp_cluster
        outputs = build_gcp_cluster(design)
    else:
        from aicluster.aws.cluster import build_aws_cluster
        outputs = build_aws_cluster(design)
    for key, value in outputs.items():
        pulumi.export(key, value)
    pulumi.export("hostlists", {p.name: p.hostlist for p in design.pools})
    pulumi.export("access", access_facts(design, pulumi.Config("gcp").get("project") if design.cloud == "gcp" else None))
    return design


def access_facts(design: ClusterDesign, gcp_project: str | None = None) -> dict:
    """What `aicluster status` needs to say how to log in (commands/deploy.py): the cluster's
    cloud, scheduler, name, region and zone, the Slurm head node's hostname (its instance name
    on GCP, its Name tag on AWS), and the GCP project."""
    from aicluster.render.slurm_files import head_hostname

    facts = {"cluster": design.name, "cloud": design.cloud, "scheduler": design.scheduler,
             "region": design.region, "zone": design.zone}
    if design.slurm is not None:
        facts["head"] = head_hostname(design.name)
    if gcp_project:
        facts["project"] = gcp_project
    return facts


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
