"""`aicluster plan`: validate a stack, run the real program offline, collect what it renders."""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Callable

from aicluster.render.alert_rules import RULES_FILE, rules_yaml
from aicluster.design.balance import ClusterBalance, from_design
from aicluster.cluster import check_buildable, check_provider_region, program
from aicluster.render.dashboards import dashboard_files
from aicluster.design.model import ClusterDesign
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.commands.k8s_manifests import kubernetes_files
from aicluster.design.observability import monitoring_design
from aicluster.offline.capture import CapturedResource, Plan, reveal
from aicluster.offline.engine import run_program
from aicluster.offline.mocks import DEFAULT_GCP_PROJECT
from aicluster.spec.cluster import ClusterSpec, parse_spec
from aicluster.commands.stacks import StackConfig, read_stack


@dataclass(frozen=True)
class PlanResult:
    """One stack's plan."""
    stack: StackConfig
    spec: ClusterSpec
    design: ClusterDesign
    plan: Plan
    balance: ClusterBalance
    files: dict[str, str]          # relative path -> rendered content, exactly as deployed


def plan_stack(target: str) -> PlanResult:
    stack = read_stack(target)
    source = str(stack.path)
    spec = parse_spec(stack.spec_data, source=source)
    try:
        check_provider_region(spec, stack.config.get(f"{spec.cloud}:region"))
        design = design_cluster(spec)
        check_buildable(design)
    except SpecError as exc:
        raise exc.with_source(source) from None
    config = dict(stack.config)
    if spec.cloud == "aws":
        config.setdefault("aws:region", spec.region)
    else:
        # A bare spec file names no project; the offline plan uses the fake cloud's. `pulumi up`
        # needs the stack's own gcp:project.
        config.setdefault("gcp:region", spec.region)
        config.setdefault("gcp:project", DEFAULT_GCP_PROJECT)
    plan = run_program(program, stack=stack.name, config=config)
    files = {**rendered_files(plan), **monitoring_files(design)}
    return PlanResult(stack, spec, design, plan, from_design(design), files)


def monitoring_files(design: ClusterDesign) -> dict[str, str]:
    """The alert rules and Grafana dashboards derived from the design (docs/operating.md); files
    to load into the metrics backend and Grafana, not resources of the stack."""
    watch = monitoring_design(design)
    return {RULES_FILE: rules_yaml(watch), **dashboard_files(watch)}


def _user_data(resource: CapturedResource) -> str | None:
    encoded = reveal(resource.inputs.get("userData"))
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return encoded  # instances take plain text user data


def _object_content(resource: CapturedResource) -> str | None:
    content = reveal(resource.inputs.get("content"))
    return content if isinstance(content, str) else None


def _object_path(resource: CapturedResource) -> str:
    """S3 key "head/slurm/slurm.conf" -> "slurm/slurm.conf" (published files keep their layout)."""
    key = str(resource.inputs.get("key", resource.name))
    return key.split("/", 1)[1] if key.startswith("head/") else key


def _user_data_path(resource: CapturedResource) -> str:
    """user-data/<name>.yaml for cloud-config, .mime for MIME multipart (EKS nodes' nodeadm format)."""
    content = _user_data(resource) or ""
    return f"user-data/{resource.name}.{'mime' if content.startswith('MIME-Version:') else 'yaml'}"


def _gcp_user_data(resource: CapturedResource) -> str | None:
    metadata = reveal(resource.inputs.get("metadata"))
    value = metadata.get("user-data") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def _startup_script(resource: CapturedResource) -> str | None:
    """A Cloud TPU VM's startup script (its hosts' counterpart of user data)."""
    metadata = reveal(resource.inputs.get("metadata"))
    value = metadata.get("startup-script") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def _gcs_object_path(resource: CapturedResource) -> str:
    """Cloud Storage object "head/slurm/slurm.conf" -> "slurm/slurm.conf", as for S3."""
    name = str(resource.inputs.get("name", resource.name))
    return name.split("/", 1)[1] if name.startswith("head/") else name


# Where each resource type keeps a file it renders, and the path it gets under --out.
_RENDERED: dict[str, tuple[Callable[[CapturedResource], str | None], Callable[[CapturedResource], str]]] = {
    "aws:ec2/launchTemplate:LaunchTemplate": (_user_data, _user_data_path),
    "aws:ec2/instance:Instance": (_user_data, lambda r: f"user-data/{r.name}.yaml"),
    "aws:s3/bucketObjectv2:BucketObjectv2": (_object_content, _object_path),
    "gcp:compute/instanceTemplate:InstanceTemplate": (_gcp_user_data, lambda r: f"user-data/{r.name}.yaml"),
    "gcp:compute/instance:Instance": (_gcp_user_data, lambda r: f"user-data/{r.name}.yaml"),
    "gcp:storage/bucketObject:BucketObject": (_object_content, _gcs_object_path),
    "gcp:tpu/v2Vm:V2Vm": (_startup_script, lambda r: f"startup-scripts/{r.name}.sh"),
}


def rendered_files(plan: Plan) -> dict[str, str]:
    files = {}
    for resource in plan.custom_resources():
        extractor = _RENDERED.get(resource.type)
        if extractor:
            content = extractor[0](resource)
            if content is not None:
                files[extractor[1](resource)] = content
        files.update(kubernetes_files(resource))   # manifests, Helm values, example jobs (k8s/)
    return files
