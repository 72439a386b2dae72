"""ClusterSpec: the one high-level description of a cluster, read from `aicluster:cluster`.

Two passes, both reporting every problem as a `SpecError` with its YAML path:
1. shape (pydantic, frozen, extra="forbid"): types, ranges, unknown keys (with "did you mean");
2. meaning (`_semantic_problems`): names that must exist in the catalog, zones inside regions,
   CIDRs that parse and do not overlap, unique names, mounts that do not nest.
Nothing else may escape `parse_spec`: any input ends in a ClusterSpec or a SpecError.
"""
from __future__ import annotations

import ipaddress
import re
import typing
from typing import Annotated, Any, Literal, Mapping

from pydantic import BaseModel, Field, ValidationError, field_validator

from aicluster import limits
from aicluster.catalog import load_catalog
from aicluster.errors import Problem, SpecError, close_match, join_path
from aicluster.spec.cost import CostSpec, cost_problems
from aicluster.spec.login import LoginSpec, login_problems
from aicluster.spec.pod_identity import DatasetSpec, ServiceAccountSpec, identity_problems
from aicluster.spec.slurm_settings import SlurmSettings, settings_problems
from aicluster.spec.teardown import DESCRIPTION as ON_DELETE_DESCRIPTION, OnDelete, on_delete_problems
from aicluster.spec.workload import ModelSpec, ParallelismSpec, SpecModel, TrainingSpec, model_problems

# Names become Slurm partitions, hostnames, Kubernetes labels and cloud resource names.
_NAME = r"^[a-z]([a-z0-9-]*[a-z0-9])?$"
Name = Annotated[str, Field(strict=True, pattern=_NAME, min_length=1, max_length=24)]
Count = Annotated[int, Field(strict=True, ge=0, le=100_000)]
Text = Annotated[str, Field(strict=True, min_length=1, max_length=256)]

# Mount points that would shadow the operating system.
_RESERVED_MOUNTS = {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root",
                    "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"}


_Model = SpecModel   # frozen, unknown keys refused; shared with the workload sections (workload_spec.py)


class ExistingNetwork(_Model):
    """Use a VPC and subnet you already have instead of creating them."""

    vpc_id: Text = Field(description="AWS: vpc-...; GCP: the network name or self link.")
    subnet_id: Text = Field(description="AWS: subnet-... in `zone`; GCP: the subnetwork name or self link.")


class NetworkSpec(_Model):
    vpc_cidr: Text | None = Field(
        None, description="CIDR of the new VPC (default 10.0.0.0/16), /16 to /24. Not with `existing`.")
    existing: ExistingNetwork | None = Field(None, description="Reuse an existing VPC and subnet.")
    ssh_ingress_cidrs: tuple[Text, ...] = Field(
        (), description="CIDRs allowed to reach the head and login nodes on TCP 22. Empty (default): no SSH "
                        "ingress at all; use SSM Session Manager on aws, IAP on gcp.")
    flow_logs: bool = Field(
        True, description="Flow logs of the network aicluster creates (default on; CIS): aws, VPC flow logs of all "
                          "traffic into the log group /aicluster/<cluster>/vpc-flow-logs, kept 30 days; gcp, the "
                          "nodes' subnet's flow logs into Cloud Logging. An existing network's are its owner's.")


class CapacitySpec(_Model):
    type: Literal["on-demand", "spot", "reservation", "capacity-block", "flex-start"] = Field(
        "on-demand", description="flex-start: GCP Dynamic Workload Scheduler flex-start VMs (gcp only).")
    reservation_id: Text | None = Field(
        None, description="Required for reservation and capacity-block: AWS cr-..., GCP reservation name.")
    nodes: Annotated[int, Field(strict=True, ge=1, le=100_000)] | None = Field(
        None, description="reservation and capacity-block: how many instances the reservation or block "
                          "holds. Kueue's quota for the pool is then at most this many nodes, so no queue "
                          "admits a job the reservation cannot start; left out, the plan warns.")


class TpuSpec(_Model):
    """A Cloud TPU slice (gcp only): its generation and its ICI topology."""

    type: Text = Field(description="TPU generation from the catalog: v4, v5e, v5p or v6e.")
    topology: Text = Field(description="Chips per ICI dimension, one of the generation's slice shapes "
                                       "(v5p 2x2x2, 4x4x4, ...; v5e and v6e 2x4, 4x8, 8x8, ...).")


# A budget of nodes: a count (2) or a percentage of the pool's max_nodes ("10%").
MaxUnavailable = Annotated[int, Field(strict=True, ge=1, le=100_000)] | Annotated[
    str, Field(strict=True, pattern=r"^([1-9][0-9]?|100)%$")]


class PoolSpec(_Model):
    name: Name
    instance_type: Text | None = Field(None, description="An instance/machine type (p5.48xlarge) or an "
                                                         "accelerator alias (h100, h200, b200, a100, ...) "
                                                         "resolved per cloud. Required unless `tpu` is given.")
    tpu: TpuSpec | None = Field(None, description="A Cloud TPU slice instead of instance_type (gcp only): "
                                                  "{type: v5p, topology: 4x4x4}. max_nodes counts hosts "
                                                  "and must be whole slices (4x4x4: 16 hosts per slice).")
    min_nodes: Count = Field(0, description="Always-on nodes (never powered down).")
    max_nodes: Annotated[int, Field(strict=True, ge=1, le=100_000)] = Field(
        description="Upper bound of the pool; nodes above min_nodes power up on demand.")
    capacity: CapacitySpec = Field(CapacitySpec(), description="How nodes are bought. A bare string "
                                                               "such as `spot` is shorthand for {type: spot}.")
    efa: Annotated[bool, Field(strict=True)] | None = Field(None, description="AWS EFA fabric. Default: on when the type supports it.")
    image: Text | None = Field(None, description="Image override: an AMI id (ami-...), an SSM parameter "
                                                 "path (/aws/...) or a GCP image / family self link.")
    root_volume_gib: Annotated[int, Field(strict=True, ge=75, le=16_384)] = Field(
        200, description="Encrypted root volume size.")
    partition: Name | None = Field(
        None, description="Slurm partition the pool's nodes join (default: the pool's name). Pools naming the "
                          "same partition share it, as the compute resources of one ParallelCluster queue do: "
                          "NVL72 pools, one per NVLink domain, share one so a job can span domains "
                          "(`sbatch -N 36 --segment=18`). Pools of one partition give the same slurm_settings. "
                          "Slurm only.")
    slurm_settings: SlurmSettings = Field(
        default_factory=dict, description="Partition parameters of slurm.conf(5) added to this pool's "
                                          "PartitionName line (MaxTime, DefaultTime, PriorityTier, AllowAccounts, "
                                          "...; a value replaces aicluster's own). Not Nodes, Default, State or the "
                                          "power-saving keys. Slurm only.")
    max_unavailable: MaxUnavailable = Field(
        "10%", description="Rolling updates: how many of the pool's nodes may be out of service at once while "
                           "they move to a new image or launch template, as a count (2) or a percentage of "
                           "max_nodes (\"10%\", the default; at least one node). Slurm: the reconcile loop "
                           "replaces nodes on the old version only when they have no job, this many at a time "
                           "(docs/operating.md, Rolling updates). EKS (aws): the node group's update_config; GKE (gcp): the "
                           "node pool's surge upgrade.")

    def unavailable_budget(self) -> int:
        """`max_unavailable` in nodes: at least one, at most max_nodes."""
        value = self.max_unavailable
        if isinstance(value, str):
            value = self.max_nodes * int(value.rstrip("%")) // 100
        return max(1, min(int(value), self.max_nodes))

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity_shorthand(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value


class StorageSpec(_Model):
    name: Name
    type: Literal["lustre", "filestore", "efs"] = Field(
        description="lustre: FSx for Lustre on AWS, Managed Lustre on GCP. filestore: Filestore (NFS, gcp only). "
                    "efs: Amazon EFS (NFS, aws Slurm only), the shared /home: elastic, no capacity to size.")
    mount: Annotated[str, Field(strict=True, pattern=r"^/[A-Za-z0-9._/-]*$", max_length=128)]
    capacity_gib: Annotated[int, Field(strict=True, ge=1, le=10_000_000)] | None = Field(
        None, description="Size in GiB. Required for lustre and filestore; leave it out for efs (elastic).")
    throughput_mbps_per_tib: Annotated[int, Field(strict=True, ge=1)] | None = Field(
        None, description="Per-TiB throughput tier (Lustre only). Default: aws 250 on PERSISTENT_2 (200 on "
                          "PERSISTENT_1); gcp 500.")
    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2", "SCRATCH_1"] = Field(
        "PERSISTENT_2", description="FSx for Lustre deployment type (aws only).")
    import_path: Text | None = Field(None, description="Bucket prefix linked to the filesystem root (Lustre only): "
                                                       "s3://bucket/prefix on aws, gs://bucket/prefix on gcp.")
    filestore_tier: Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL", "ENTERPRISE"] | None = Field(
        None, description="Filestore service tier (type filestore only). Default: ZONAL.")
    protect: Annotated[bool, Field(strict=True)] = Field(True, description="protect + retain_on_delete: Pulumi refuses to delete or "
                                            "replace it, and `pulumi destroy` leaves it in place.")
    on_delete: OnDelete = Field("retain", description=ON_DELETE_DESCRIPTION + " snapshot: FSx for Lustre "
                                "persistent and not linked to S3 (FSx's final backup), efs (an AWS Backup job), "
                                "filestore (a Filestore backup); not scratch FSx nor Managed Lustre.")


class WorkloadSpec(_Model):
    """The training job the cluster is for: its size (for the balance report and policy checks) and,
    optionally, the model, training set-up and layout the training model estimates step time, memory
    and time to train from (`aicluster estimate`)."""

    model_params_b: Annotated[float, Field(gt=0, le=100_000)] | None = Field(
        None, description="Model size in billions of parameters: the short form. Required unless "
                          "`model` is given (then computed from it when left out).")
    model: ModelSpec | None = Field(None, description="The model's architecture, for the training model "
                                                      "(step time, memory, layout, time to train).")
    training: TrainingSpec | None = Field(None, description="Batch, precision and tokens to train on "
                                                            "(with `model`). Default: global_batch_seqs "
                                                            "from a 4M-token batch, bf16, no token count.")
    parallelism: ParallelismSpec | None = Field(None, description="Layout degrees to fix (with `model`); "
                                                                  "what is left out is searched.")
    checkpoint_interval_min: Annotated[float, Field(gt=0, le=10_080)] = Field(
        30.0, description="Minutes between checkpoints.")
    max_checkpoint_stall_pct: Annotated[float, Field(gt=0, lt=100)] = Field(
        5.0, description="Share of the checkpoint interval a synchronous checkpoint write may stall training.")


# An e-mail address as SNS and Cloud Monitoring take it: one @, a dot in the domain, no spaces.
_EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
MAX_ALERT_EMAILS = 10


class MonitoringSpec(_Model):
    alert_emails: Annotated[tuple[Annotated[str, Field(strict=True, pattern=_EMAIL, max_length=254)], ...],
                            Field(max_length=MAX_ALERT_EMAILS)] = Field(
        (), description="Addresses the cluster's alerts are e-mailed to: on aws an SNS e-mail subscription "
                        "to the alerts topic (each address confirms it once, from the mail AWS sends); on gcp a "
                        "Cloud Monitoring e-mail notification channel on every alert policy. Default: none "
                        "(aws: subscribe to the `alerts_topic_arn` output; gcp: incidents in the console).")
    on_delete: OnDelete = Field("retain", description=ON_DELETE_DESCRIPTION + " retain or delete: aws, the "
                                "Managed Prometheus workspace (the metrics history) and the alerts topic's KMS key; "
                                "gcp keeps metrics in the project's Managed Service for Prometheus either way.")


class HeadNodeSpec(_Model):
    instance_type: Text | None = Field(None, description="A controller type from the catalog "
                                                         "(`aicluster catalog`); the policy pack checks it "
                                                         "against the node count. Default: m7i.2xlarge on aws, "
                                                         "n2-standard-8 on gcp.")
    root_volume_gib: Annotated[int, Field(strict=True, ge=50, le=16_384)] = 100
    public_ip: Annotated[bool, Field(strict=True)] = Field(
        False, description="Put the head node in the public subnet with a public IP (new VPC only). "
                           "Default: private, reached through SSM Session Manager on aws, IAP on gcp.")
    on_delete: OnDelete = Field("retain", description=ON_DELETE_DESCRIPTION + " retain or delete: the head node, "
                                "its slurmctld state, MariaDB with accounting on the head, and the munge key.")


# The baked image's root volume (aws/image.py, gcp/image.py): what boots it needs at least this much.
NODE_IMAGE_VOLUME_GIB = 100


class NodeImageSpec(_Model):
    """The image the Slurm compute and login nodes boot (docs/images.md)."""

    build: Annotated[bool, Field(strict=True)] = Field(
        False, description="Bake the nodes' image in this stack (EC2 Image Builder on aws, a builder VM and a "
                           "Compute Engine image on gcp) with the pinned Slurm, munge, enroot, pyxis, the "
                           "exporters and the on-node programs, and boot the GPU pools and login nodes from it: "
                           "their boot then installs nothing.")
    id: Text | None = Field(
        None, description="An image you baked with aicluster's image build (`aicluster-node-install --bake`, "
                          "docs/images.md) for this cluster's pins: an AMI id (ami-...) on aws, an image or image "
                          "family self link on gcp. Not with build.")


class SlurmSpec(_Model):
    suspend_idle_min: Annotated[float, Field(ge=1, le=1440)] = Field(
        10, description="Idle minutes before a dynamic node powers down (SuspendTime).")
    resume_timeout_min: Annotated[int, Field(strict=True, ge=5, le=120)] = Field(
        30, description="Minutes a node may take to boot and register (ResumeTimeout); large GPU "
                        "nodes need 20-30.")
    accounting: Literal[False, True, "head", "managed"] = Field(
        False, description="Slurm accounting (sacct, fairshare, QoS). false: off. true or head: slurmdbd with "
                           "MariaDB on the head node (the history lives and dies with the head). managed: slurmdbd "
                           "on the head, its database in Amazon RDS for MariaDB (aws) or Cloud SQL for MySQL (gcp): "
                           "private, encrypted, TLS only, backed up, protected and retained, its password in the "
                           "secret store, so the history outlives the head. With accounting on: fairshare "
                           "(priority/multifactor) and the QoS normal (default), high and low (docs/accounting.md).")
    accounting_subnet_ids: tuple[Text, ...] = Field(
        (), description="aws, accounting managed, network.existing only: two or more private subnet ids in two "
                        "zones for the RDS DB subnet group (RDS needs two zones; in a VPC it creates, aicluster "
                        "makes them in the VPC's free last quarter).")
    accounting_on_delete: OnDelete = Field(
        "retain", description=ON_DELETE_DESCRIPTION + " The managed accounting database (accounting: managed): "
                              "snapshot is RDS's final snapshot or Cloud SQL's final backup.")
    head_node: HeadNodeSpec = HeadNodeSpec()
    node_image: NodeImageSpec = Field(
        NodeImageSpec(), description="Baked node images (docs/images.md). Default: none, every node installs its "
                                     "pinned software at boot, each download checked against its SHA-256.")
    login: LoginSpec = Field(LoginSpec(), description="Login nodes (login_spec.py): count, instance_type, root_volume_gib.")
    settings: SlurmSettings = Field(
        default_factory=dict, description="slurm.conf(5) parameters merged into slurm.conf (ParallelCluster's "
                                          "CustomSlurmSettings), e.g. {MaxJobCount: 20000}. Keys aicluster owns "
                                          "(ClusterName, SlurmctldHost, AuthType, the power-saving programs, ...) "
                                          "are refused; SchedulerParameters and LaunchParameters add to aicluster's "
                                          "items.")


class SystemNodesSpec(_Model):
    instance_type: Text | None = Field(None, description="A controller type from the catalog for the add-on "
                                                         "controllers (CoreDNS, Kueue, JobSet, CSI controllers). "
                                                         "Default: m7i.xlarge on aws, n2-standard-4 on gcp.")
    count: Annotated[int, Field(strict=True, ge=1, le=20)] = Field(
        2, description="Nodes of the system node group (two: add-on controllers survive losing one).")


class TeamSpec(_Model):
    name: Name = Field(description="The team's namespace (created by aicluster), with the LocalQueue `default` "
                                   "there and a ClusterQueue <cluster>-<name> in the cluster's cohort.")
    nodes: Annotated[Mapping[Name, Annotated[int, Field(strict=True, ge=0, le=100_000)]],
                     Field(max_length=limits.POOLS.value)] = Field(
        default_factory=dict, description="Nodes of each pool guaranteed to the team (pool name -> nodes; the "
                                          "ClusterQueue's nominal quota). Pools left out: none guaranteed. Idle "
                                          "quota of any queue is lent to the others and reclaimed by preemption "
                                          "when its owner needs it; the training namespace's queue keeps what "
                                          "no team is guaranteed.")


class KubernetesSpec(_Model):
    gpu_devices: Literal["nvidia-device-plugin", "gpu-operator"] = Field(
        "nvidia-device-plugin", description="What advertises nvidia.com/gpu: the NVIDIA device plugin "
                                            "(default) or the GPU operator with its driver and toolkit "
                                            "off (the EKS AMI ships them). Never both. aws only: GKE "
                                            "installs the driver and device plugin itself.")
    api_access: Literal["endpoint", "vpc", "private"] = Field(
        "endpoint", description="How `pulumi up` (which installs the add-ons through the Kubernetes API) and "
                                "kubectl reach the API. endpoint (default): gcp: the DNS-based endpoint, "
                                "authorized by IAM; aws: the public endpoint, open to api_access_cidrs only "
                                "(required). vpc: private endpoint only; run `pulumi up` inside the VPC or a "
                                "network routed to it. private: private endpoint only, and `pulumi up` creates "
                                "no in-cluster object; switch to vpc and run it again from inside the VPC.")
    api_access_cidrs: tuple[Text, ...] = Field(
        (), description="CIDRs allowed to reach the public API endpoint (with api_access endpoint): on aws "
                        "the network `pulumi up` and kubectl run from (required there); on gcp an optional "
                        "public IP endpoint beside the DNS endpoint.")
    admins: tuple[Text, ...] = Field(
        (), description="aws only: IAM role or user ARNs given cluster admin through EKS access entries "
                        "(on gcp, GKE access is IAM roles in the project).")
    system_nodes: SystemNodesSpec = SystemNodesSpec()
    namespace: Name = Field("training", description="Namespace of the training jobs, their filesystem claims "
                                                    "and the Kueue LocalQueue.")
    teams: tuple[TeamSpec, ...] = Field(
        (), description="More namespaces for other teams, each with its own Kueue LocalQueue and ClusterQueue; "
                        "all ClusterQueues share one cohort (docs/eks.md, Priorities and teams).")
    service_accounts: tuple[ServiceAccountSpec, ...] = Field(
        (), max_length=100, description="Kubernetes ServiceAccounts with a cloud identity that reaches exactly the "
                                        "buckets named (aws: EKS Pod Identity; gcp: GKE Workload Identity); "
                                        "docs/kubernetes-day-two.md, Identity and data for pods.")
    datasets: tuple[DatasetSpec, ...] = Field(
        (), max_length=100, description="Buckets mounted read-only as volumes (aws: Mountpoint for S3 on EKS; gcp: "
                                        "Cloud Storage FUSE on GKE), read with a service account's identity; counted "
                                        "in the balance report's storage throughput.")
    control_plane_zone: Text | None = Field(
        None, description="aws only: second zone for the EKS control plane's subnets (EKS needs two zones). "
                          "Default: the zone's neighbour (a <-> b). New VPC only.")
    control_plane_subnet_ids: tuple[Text, ...] = Field(
        (), description="aws only, with network.existing: two or more subnets in two zones for the EKS "
                        "control plane.")


class ClusterSpec(_Model):
    """The cluster spec: stack config key `aicluster:cluster`."""

    name: Annotated[str, Field(strict=True, pattern=_NAME, min_length=2, max_length=32)]
    cloud: Literal["aws", "gcp"]
    region: Text
    zone: Text
    scheduler: Literal["slurm", "kubernetes"] = "slurm"
    network: NetworkSpec = NetworkSpec()
    pools: Annotated[tuple[PoolSpec, ...], Field(min_length=1, max_length=limits.POOLS.value)]
    storage: Annotated[tuple[StorageSpec, ...], Field(max_length=limits.STORAGE.value)] = ()
    workload: WorkloadSpec | None = None
    slurm: SlurmSpec = Field(SlurmSpec(), description="Slurm settings (scheduler: slurm only).")
    kubernetes: KubernetesSpec = Field(KubernetesSpec(), description="Kubernetes settings: EKS on aws, GKE on gcp "
                                                                    "(scheduler: kubernetes only).")
    monitoring: MonitoringSpec = Field(MonitoringSpec(), description="Where the cluster's alerts go "
                                                                     "(docs/operating.md).")
    cost: CostSpec | None = Field(None, description="A monthly budget with alerts to where monitoring's alerts "
                                                  "go (spec/cost.py, docs/operating.md). Default: none.")
    tags: Mapping[Annotated[str, Field(strict=True, min_length=1, max_length=63)],
                  Annotated[str, Field(strict=True, max_length=63)]] = Field(
        default_factory=dict, description="Added to every resource (GCP: as labels, lower-cased, other characters "
                                          "than letters, digits, _ and - turned into -). Keys starting with aws: or "
                                          "aicluster- are reserved, also once turned into a label (aicluster.node, "
                                          "AICLUSTER:node).")


def parse_spec(data: Any, source: str | None = None) -> ClusterSpec:
    """Validate raw config data; raise SpecError (and nothing else) when it is not a valid spec."""
    problems = _size_problems(data)
    if problems:   # nothing else is checked: every later check then runs on bounded lists
        raise SpecError(problems, source)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(validation_problems(exc, ClusterSpec), source) from None
    except RecursionError:
        raise SpecError([Problem("", "<deeply nested value>", "the spec nests too deeply")], source) from None
    problems = _semantic_problems(spec)
    if problems:
        raise SpecError(problems, source)
    return spec


def _size_problems(data: Any) -> list[Problem]:
    """Lists longer than limits.SPEC_LISTS allows, found on the raw data before the models validate
    them item by item: an over-long list costs one len(), whatever its length."""
    if not isinstance(data, Mapping):
        return []
    problems = []
    for path, limit in limits.SPEC_LISTS.items():
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, (list, tuple)) and len(value) > limit.value:
            problems.append(Problem(join_path(*path), f"{len(value)} items",
                                    f"a list of at most {limit.value} items ({limit.source})"))
    return problems


def json_schema() -> dict:
    schema = ClusterSpec.model_json_schema()
    # The `capacity: spot` shorthand is accepted by a before-validator; say so to editors too.
    capacity = schema["$defs"]["PoolSpec"]["properties"]["capacity"]
    kinds = schema["$defs"]["CapacitySpec"]["properties"]["type"]["enum"]
    schema["$defs"]["PoolSpec"]["properties"]["capacity"] = {
        "anyOf": [{"$ref": "#/$defs/CapacitySpec"}, {"type": "string", "enum": kinds}],
        **{k: v for k, v in capacity.items() if k not in ("$ref", "allOf")},
    }
    return schema


# --- pass 1: turn pydantic errors into problems -------------------------------------------


def validation_problems(exc: ValidationError, root: type[BaseModel]) -> list[Problem]:
    """Every error of validating data against `root` (ClusterSpec, or another document such as a
    workload file) as a Problem at its YAML path, unknown keys with the allowed ones and a close match."""
    errors = exc.errors()
    # A list whose items failed also reports "too short" once they are dropped: noise.
    errors = [e for e in errors if not (e["type"] == "too_short" and _has_inner_error(e, errors))]
    return [_problem_from(e, root) for e in errors]


def _problem_from(error: Mapping[str, Any], root: type[BaseModel]) -> Problem:
    loc = tuple(error.get("loc", ()))
    kind = error.get("type", "")
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = sorted(_fields_at(root, loc[:-1]))
        return Problem(join_path(*loc), loc[-1], f"unknown key; allowed keys: {', '.join(allowed)}",
                       close_match(str(loc[-1]), allowed))
    if kind == "missing":
        return Problem(join_path(*loc), None, "this key is required")
    if kind == "literal_error":
        # pydantic spells the choices "False, True, 'head' or 'managed'": quoted strings, bare
        # booleans (shown as YAML writes them).
        expected = str(ctx.get("expected", ""))
        choices = re.findall(r"'([^']*)'", expected)
        flags = [w.lower() for w in re.findall(r"(?<!')\b(True|False)\b(?!')", expected)]
        return Problem(join_path(*loc), value, f"allowed: {', '.join(flags + choices)}",
                       close_match(value, choices) if isinstance(value, str) else None)
    if kind == "string_pattern_mismatch" and loc and loc[-1] == "name":
        return Problem(join_path(*loc), value, "use lowercase letters, digits and '-', starting with a "
                                               "letter and not ending with '-'")
    if kind in _ALLOWED_TEXT:
        return Problem(join_path(*loc), value, _ALLOWED_TEXT[kind].format(**ctx))
    return Problem(join_path(*loc), value, error.get("msg", "invalid value").replace("Value error, ", ""))


# What is allowed, in the user's terms, for the pydantic error kinds a YAML file can trigger.
_ALLOWED_TEXT = {
    "greater_than_equal": "a number >= {ge}",
    "greater_than": "a number > {gt}",
    "less_than_equal": "a number <= {le}",
    "less_than": "a number < {lt}",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "string_type": "a string",
    "string_too_short": "a string of at least {min_length} characters",
    "string_too_long": "a string of at most {max_length} characters",
    "string_pattern_mismatch": "a string matching {pattern}",
    "too_short": "a list of at least {min_length} items",
    "too_long": "a list of at most {max_length} items",
    "tuple_type": "a list",
    "dict_type": "a mapping (key: value)",
    "model_type": "a mapping (key: value)",
    "model_attributes_type": "a mapping (key: value)",
}


def _has_inner_error(outer: Mapping[str, Any], errors: list) -> bool:
    loc = tuple(outer["loc"])
    return any(len(e["loc"]) > len(loc) and tuple(e["loc"][:len(loc)]) == loc for e in errors)


def _fields_at(root: type[BaseModel], loc: tuple) -> set[str]:
    """The keys allowed at a YAML path, found by walking the model annotations from `root`."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return set()
        model = _inner_model(model.model_fields[part].annotation)
    return set(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else set()


def _inner_model(annotation: Any) -> Any:
    """PoolSpec from `tuple[PoolSpec, ...]`, `PoolSpec | None`, `Annotated[...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# --- pass 2: meaning ------------------------------------------------------------------------

_REGION_EXAMPLE = {"aws": "us-east-1", "gcp": "us-central1"}


def _zones_of(spec: ClusterSpec) -> tuple[str, ...]:
    """The zones of the spec's region (catalog/regions.yaml); empty for an unknown region."""
    from aicluster.catalog.regions import places

    return places(spec.cloud).zones.get(spec.region, ())


_GCP_IMAGE = re.compile(r"(https://www\.googleapis\.com/compute/v1/)?projects/[a-z][-a-z0-9.:]*[a-z0-9]/global/images/"
                        r"(family/)?[a-z]([-a-z0-9]*[a-z0-9])?")


def _semantic_problems(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    problems += _location_problems(spec)
    problems += _network_problems(spec)
    problems += _pool_problems(spec)
    problems += _storage_problems(spec)
    problems += _tag_problems(spec)
    problems += _slurm_problems(spec)
    problems += _kubernetes_problems(spec)
    problems += _team_problems(spec)
    problems += on_delete_problems(spec.cloud, spec.scheduler, spec.storage, spec.slurm, spec.monitoring)
    problems += cost_problems(spec.cloud, spec.cost, spec.monitoring.alert_emails)
    if spec.scheduler == "kubernetes":
        problems += identity_problems(spec.cloud, spec.kubernetes, {fs.name for fs in spec.storage})
    if spec.workload is not None:
        problems += workload_problems(spec.workload, "workload")
    return problems


def workload_problems(workload: WorkloadSpec, at: str) -> list[Problem]:
    """A size to go by (model_params_b or model), sections that need a model only with one, and
    the model's own checks. `at` is the section's YAML path (a workload file has none: "")."""
    def path(key: str) -> str:
        return f"{at}.{key}" if at else key

    problems = []
    if workload.model is None:
        if workload.model_params_b is None:
            problems.append(Problem(path("model_params_b"), None, "this key is required unless `model` describes "
                                    "the architecture (layers, hidden, heads, ffn_hidden, vocab, seq_len)"))
        for key in ("training", "parallelism"):
            if getattr(workload, key) is not None:
                problems.append(Problem(path(key), "<section>", "describe the model too (a `model` section): "
                                        f"{key} applies to a described architecture"))
    else:
        problems += model_problems(workload.model, path("model"))
    return problems


def _slurm_problems(spec: ClusterSpec) -> list[Problem]:
    problems = []
    if "slurm" in spec.model_fields_set and spec.scheduler != "slurm":
        problems.append(Problem("slurm", "<section>", "leave it out unless scheduler is slurm"))
    head = spec.slurm.head_node
    controllers = [n for n, c in load_catalog().controllers.items() if c.cloud == spec.cloud]
    if head.instance_type is not None and head.instance_type not in controllers:
        problems.append(Problem("slurm.head_node.instance_type", head.instance_type,
                                f"a {spec.cloud} controller type: {', '.join(controllers)}",
                                close_match(head.instance_type, controllers)))
    if head.public_ip and spec.network.existing:
        problems.append(Problem("slurm.head_node.public_ip", True,
                                "false with network.existing (aicluster only knows the private subnet)"))
    problems += login_problems(spec.cloud, spec.slurm.login, controllers)
    problems += _accounting_problems(spec)
    problems += _node_image_problems(spec)
    problems += settings_problems(spec.slurm.settings, "slurm.settings")
    for i, pool in enumerate(spec.pools):
        problems += settings_problems(pool.slurm_settings, f"pools[{i}].slurm_settings", partition=True)
        if pool.slurm_settings and spec.scheduler != "slurm":
            problems.append(Problem(f"pools[{i}].slurm_settings", "<section>", "leave it out unless scheduler is slurm"))
    problems += _partition_problems(spec)
    return problems


def _partition_problems(spec: ClusterSpec) -> list[Problem]:
    """`partition` is Slurm's; pools sharing one give the same partition parameters (one
    PartitionName line holds them)."""
    problems = []
    first: dict[str, int] = {}
    for i, pool in enumerate(spec.pools):
        if pool.partition is not None and spec.scheduler != "slurm":
            problems.append(Problem(f"pools[{i}].partition", pool.partition, "leave it out unless scheduler is slurm"))
            continue
        name = pool.partition or pool.name
        j = first.setdefault(name, i)
        if j != i and dict(pool.slurm_settings) != dict(spec.pools[j].slurm_settings):
            problems.append(Problem(f"pools[{i}].slurm_settings", dict(pool.slurm_settings),
                                    f"the same as pools[{j}].slurm_settings ({dict(spec.pools[j].slurm_settings)}): "
                                    f"both pools are in partition {name}"))
        if j != i and _nvlink_pool(spec, pool) != _nvlink_pool(spec, spec.pools[j]):
            # topology/block places a job whose nodes are in some block inside the blocks only, so
            # the other pools' nodes of such a partition would never run its jobs (design/slurm_blocks.py).
            problems.append(Problem(f"pools[{i}].partition", name,
                                    f"a partition of its own: pools of multi-node NVLink domains (NVL72) share a "
                                    f"partition only with each other, and pools[{j}] ({spec.pools[j].name}) "
                                    f"{'is' if _nvlink_pool(spec, spec.pools[j]) else 'is not'} one",
                                    pool.name))
    return problems


def _nvlink_pool(spec: ClusterSpec, pool: PoolSpec) -> bool:
    """Whether a pool's instance type has an NVLink domain of several nodes (GB200/GB300 NVL72)."""
    itype = load_catalog().resolve(spec.cloud, pool.instance_type) if pool.instance_type else None
    return itype is not None and itype.nodes_per_nvlink_domain > 1


# Tags aicluster puts on the baked image's Image Builder resources: cluster, role, contents key.
IMAGEBUILDER_AICLUSTER_TAGS = 3


def imagebuilder_tag_budget() -> int:
    from aicluster.catalog import load_limits

    return int(load_limits()["imagebuilder_tags_per_resource"].value) - IMAGEBUILDER_AICLUSTER_TAGS


def _node_image_problems(spec: ClusterSpec) -> list[Problem]:
    """One source of the baked image, in the form of the cluster's cloud."""
    image, at = spec.slurm.node_image, "slurm.node_image"
    if image.build and image.id is not None:
        return [Problem(f"{at}.id", image.id, "leave it out with build: true (the stack bakes the image itself)")]
    if image.id is None and not image.build:
        return []
    problems = []
    if spec.cloud == "aws" and image.build and len(spec.tags) > imagebuilder_tag_budget():
        problems.append(Problem("tags", f"{len(spec.tags)} tags",
                                f"at most {imagebuilder_tag_budget()} with slurm.node_image.build on aws (Image Builder "
                                f"takes {imagebuilder_tag_budget() + IMAGEBUILDER_AICLUSTER_TAGS} tags per resource, "
                                f"{IMAGEBUILDER_AICLUSTER_TAGS} are aicluster's)"))
    problems += [Problem(f"pools[{i}].root_volume_gib", pool.root_volume_gib,
                        f"at least {NODE_IMAGE_VOLUME_GIB} (the baked node image's root volume) with slurm.node_image")
                for i, pool in enumerate(spec.pools)
                if pool.image is None and pool.tpu is None and pool.root_volume_gib < NODE_IMAGE_VOLUME_GIB]
    if spec.slurm.login.count and spec.slurm.login.root_volume_gib < NODE_IMAGE_VOLUME_GIB:
        problems.append(Problem("slurm.login.root_volume_gib", spec.slurm.login.root_volume_gib,
                                f"at least {NODE_IMAGE_VOLUME_GIB} (the baked node image's root volume) with "
                                "slurm.node_image"))
    if image.id is None:
        return problems
    if spec.cloud == "aws" and not re.fullmatch(r"ami-[0-9a-f]{8,17}", image.id):
        return [*problems, Problem(f"{at}.id", image.id, "an AMI id (ami- and 8 or 17 hex digits)")]
    if spec.cloud == "gcp" and not re.search(r"(^|/)(global/images/|images/family/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
                                              image.id):
        return [*problems, Problem(f"{at}.id", image.id, "an image or image family: a name or "
                                                         "projects/P/global/images/NAME (or .../images/family/FAMILY)")]
    return problems


def _accounting_problems(spec: ClusterSpec) -> list[Problem]:
    """The RDS subnet group spans two zones: in an existing network the user names its subnets."""
    slurm, at = spec.slurm, "slurm.accounting_subnet_ids"
    needs_ids = spec.cloud == "aws" and slurm.accounting == "managed" and spec.network.existing
    if needs_ids and len(slurm.accounting_subnet_ids) < 2:
        return [Problem(at, list(slurm.accounting_subnet_ids),
                        "two or more private subnet ids in two zones (the RDS DB subnet group of slurmdbd's "
                        "database) with accounting managed and network.existing")]
    if slurm.accounting_subnet_ids and not needs_ids:
        return [Problem(at, list(slurm.accounting_subnet_ids),
                        "leave it out unless cloud is aws, accounting is managed and network.existing is set")]
    return [Problem(f"{at}[{i}]", subnet, "an id such as subnet-0123456789abcdef0")
            for i, subnet in enumerate(slurm.accounting_subnet_ids) if not re.fullmatch(r"subnet-[0-9a-f]{8,17}", subnet)]


_IAM_PRINCIPAL = re.compile(r"arn:aws(-[a-z]+)*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}")


def _kubernetes_problems(spec: ClusterSpec) -> list[Problem]:
    """scheduler: kubernetes builds EKS with the EKS-optimized accelerated AL2023 (NVIDIA) AMI."""
    if spec.scheduler != "kubernetes":
        if "kubernetes" in spec.model_fields_set:
            return [Problem("kubernetes", "<section>", "leave it out unless scheduler is kubernetes")]
        return []
    if spec.cloud != "aws":
        return _gke_problems(spec)
    from aicluster.catalog.kubernetes import second_zone, versions

    k8s, problems = spec.kubernetes, []
    catalog = load_catalog()
    problems += _nvlink_version_problems(spec, "eks", versions().kubernetes)
    for i, pool in enumerate(spec.pools):
        itype = catalog.resolve(spec.cloud, pool.instance_type) if pool.instance_type else None
        if itype is None:
            continue   # reported by the pool checks
        # The type's own AMI type where its image role has one (Grace: gpu-arm64), else x86_64 NVIDIA.
        amis = versions().ami_types
        gpu_ami = amis[itype.image] if itype.image in amis else amis["gpu"]
        if itype.accelerator.kind != "gpu" or itype.family not in gpu_ami["instance_families"]:
            # An arm64 GPU type (Grace: p6e-gb200) needs EKS's AL2023_ARM_64_NVIDIA AMI type.
            needs = ("the Neuron AMI and device plugin" if itype.accelerator.kind != "gpu"
                     else "the arm64 AL2023 NVIDIA AMI")
            problems.append(Problem(f"pools[{i}].instance_type", pool.instance_type,
                                    f"an NVIDIA GPU type the EKS {gpu_ami['ami_type']} AMI supports with scheduler "
                                    f"kubernetes ({itype.name} would need {needs}, not built)"))
        if pool.image:
            problems.append(Problem(f"pools[{i}].image", pool.image,
                                    f"leave it out with scheduler kubernetes: EKS node groups run the "
                                    f"EKS-optimized accelerated AL2023 AMI ({gpu_ami['ami_type']})"))
        if pool.capacity.type == "capacity-block" and pool.min_nodes:
            problems.append(Problem(f"pools[{i}].min_nodes", pool.min_nodes,
                                    "0 with capacity-block on EKS: the node group is created empty (the block "
                                    "may not be active yet) and scaled up when the block starts, by a scheduled "
                                    "action or `aws eks update-nodegroup-config`; EKS scales it back to 0 before "
                                    "the block ends (EKS user guide, capacity-blocks-mng)", "0"))
    problems += _system_nodes_problems(spec)
    problems += _api_cidr_problems(spec)
    problems += _api_access_problems(spec)
    for i, arn in enumerate(k8s.admins):
        if not _IAM_PRINCIPAL.fullmatch(arn):
            problems.append(Problem(f"kubernetes.admins[{i}]", arn,
                                    "an IAM role or user ARN such as arn:aws:iam::123456789012:role/ml-admins"))
    if k8s.control_plane_zone is not None:
        if spec.network.existing:
            problems.append(Problem("kubernetes.control_plane_zone", k8s.control_plane_zone,
                                    "leave it out with network.existing (use control_plane_subnet_ids)"))
        elif k8s.control_plane_zone not in _zones_of(spec) or k8s.control_plane_zone == spec.zone:
            others = [z for z in _zones_of(spec) if z != spec.zone]
            problems.append(Problem("kubernetes.control_plane_zone", k8s.control_plane_zone,
                                    f"another zone of {spec.region} than {spec.zone}: {', '.join(others)}",
                                    second_zone(spec.zone) if second_zone(spec.zone) in others else
                                    (others[0] if others else None)))
    if spec.network.existing and len(k8s.control_plane_subnet_ids) < 2:
        problems.append(Problem("kubernetes.control_plane_subnet_ids", list(k8s.control_plane_subnet_ids),
                                "two or more subnet ids in two zones (EKS puts its control-plane interfaces there)"))
    if not spec.network.existing and k8s.control_plane_subnet_ids:
        problems.append(Problem("kubernetes.control_plane_subnet_ids", list(k8s.control_plane_subnet_ids),
                                "leave it out unless network.existing is set (aicluster creates them)"))
    for i, subnet in enumerate(k8s.control_plane_subnet_ids):
        if not re.fullmatch(r"subnet-[0-9a-f]{8,17}", subnet):
            problems.append(Problem(f"kubernetes.control_plane_subnet_ids[{i}]", subnet,
                                    "an id such as subnet-0123456789abcdef0"))
    return problems


# Namespaces a team may not take: Kubernetes' own and those of the charts aicluster installs.
_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _team_problems(spec: ClusterSpec) -> list[Problem]:
    """kubernetes.teams: namespaces of their own, pools of the spec, and no pool guaranteed to the
    teams beyond its max_nodes (TPU pools: in whole slices)."""
    if spec.scheduler != "kubernetes" or not spec.kubernetes.teams:
        return []
    from aicluster.catalog.kubernetes import versions

    taken = {**{c.namespace: f"the {c.name} chart's namespace" for c in versions().charts.values()},
             **{ns: "a Kubernetes namespace" for ns in _SYSTEM_NAMESPACES},
             spec.kubernetes.namespace: "the training namespace (kubernetes.namespace)"}
    pools = {p.name: p for p in spec.pools}
    guaranteed = {name: 0 for name in pools}
    problems = []
    for i, team in enumerate(spec.kubernetes.teams):
        at = f"kubernetes.teams[{i}]"
        if team.name in taken:
            problems.append(Problem(f"{at}.name", team.name, f"a namespace of its own, not {taken[team.name]}"))
        taken.setdefault(team.name, f"the team at {at}")
        for pool, nodes in team.nodes.items():
            if pool not in pools:
                problems.append(Problem(f"{at}.nodes.{pool}", nodes, f"a pool of this spec: {', '.join(pools)}",
                                        close_match(pool, list(pools))))
                continue
            guaranteed[pool] += nodes
            hosts = _slice_hosts(spec, pools[pool])
            if nodes % hosts:
                problems.append(Problem(f"{at}.nodes.{pool}", nodes,
                                        f"whole slices of pool {pool}: a multiple of {hosts} hosts"))
    for name, total in guaranteed.items():
        if total > pools[name].max_nodes:
            problems.append(Problem("kubernetes.teams", f"{total} nodes of pool {name}",
                                    f"at most the pool's max_nodes ({pools[name].max_nodes}) guaranteed to the "
                                    "teams together: a quota beyond the pool admits jobs no node can run"))
        elif pools[name].capacity.nodes is not None and total > pools[name].capacity.nodes:
            problems.append(Problem("kubernetes.teams", f"{total} nodes of pool {name}",
                                    f"at most the {pools[name].capacity.nodes} instances its {pools[name].capacity.type} "
                                    "holds (capacity.nodes) guaranteed to the teams together: a quota beyond "
                                    "the reservation admits jobs no instance can start"))
    return problems


def _slice_hosts(spec: ClusterSpec, pool: PoolSpec) -> int:
    """Hosts of one of the pool's TPU slices (1 for a GPU pool or a TPU pool the pool checks refuse)."""
    from aicluster.catalog.tpu_slices import topology_problem, tpu_slice

    gen = load_catalog().tpus.get(pool.tpu.type.lower()) if pool.tpu is not None else None
    if gen is None or topology_problem(gen, pool.tpu.topology):
        return 1
    return tpu_slice(gen, pool.tpu.topology).hosts


def _system_nodes_problems(spec: ClusterSpec) -> list[Problem]:
    chosen = spec.kubernetes.system_nodes.instance_type
    controllers = [n for n, c in load_catalog().controllers.items() if getattr(c, "cloud", "aws") == spec.cloud]
    if chosen is not None and chosen not in controllers:
        return [Problem("kubernetes.system_nodes.instance_type", chosen,
                        f"a {spec.cloud} controller type: {', '.join(controllers)}", close_match(chosen, controllers))]
    return []


def _api_cidr_problems(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    cidrs = spec.kubernetes.api_access_cidrs
    parsed = [(i, _parse_cidr(text, f"kubernetes.api_access_cidrs[{i}]", problems)) for i, text in enumerate(cidrs)]
    for i, cidr in parsed:
        if cidr is not None and cidr.prefixlen == 0:
            problems.append(Problem(f"kubernetes.api_access_cidrs[{i}]", cidrs[i],
                                    "named CIDRs: an API endpoint open to the whole internet is refused"))
    for i, j in _overlapping_cidrs([(i, cidr) for i, cidr in parsed if cidr is not None]):
        problems.append(Problem(f"kubernetes.api_access_cidrs[{i}]", cidrs[i],
                                f"CIDRs that do not overlap (it overlaps api_access_cidrs[{j}] {parsed[j][1]})"))
    return problems


def _api_access_problems(spec: ClusterSpec) -> list[Problem]:
    """`pulumi up` creates the in-cluster objects through the Kubernetes API, so the spec must name a
    way to reach it (kubernetes_design.API_ACCESS)."""
    k8s = spec.kubernetes
    if k8s.api_access != "endpoint":
        if k8s.api_access_cidrs:
            return [Problem("kubernetes.api_access_cidrs", list(k8s.api_access_cidrs),
                            f"leave it out with api_access {k8s.api_access}: the API endpoint stays private")]
        return []
    if spec.cloud == "aws" and not k8s.api_access_cidrs:
        return [Problem("kubernetes.api_access_cidrs", [],
                        "the CIDRs of the network that runs `pulumi up` and kubectl, such as its egress "
                        "address 203.0.113.7/32: `pulumi up` installs the add-ons through the Kubernetes API, "
                        "EKS has no IAM-authorized endpoint, and a private endpoint cannot be reached from "
                        "outside the VPC. Or set kubernetes.api_access: vpc (`pulumi up` runs inside the VPC or "
                        "over VPN / Direct Connect) or private (two phases: the cluster now, the in-cluster "
                        "objects later from inside the VPC)")]
    return []


def _nvlink_version_problems(spec: ClusterSpec, platform: str, version: str) -> list[Problem]:
    """A pool whose NVLink domain spans nodes needs DRA (the NVIDIA DRA driver's ComputeDomains):
    the cluster version aicluster pins must be at least the platform's floor (kubernetes.yaml
    nvlink_domains.min_version: EKS 1.33 for P6e-GB200, GKE the DRA driver chart's 1.32)."""
    from aicluster.catalog.kubernetes import version_tuple, versions

    floor = versions().nvlink_min_versions.get(platform)
    if floor is None or version_tuple(version) >= version_tuple(floor):
        return []
    problems = []
    for i, pool in enumerate(spec.pools):
        itype = load_catalog().resolve(spec.cloud, pool.instance_type) if pool.instance_type else None
        if itype is not None and itype.nodes_per_nvlink_domain > 1:
            problems.append(Problem(f"pools[{i}].instance_type", pool.instance_type,
                                    f"a type whose NVLink domain is one node: {itype.name} needs {platform.upper()} "
                                    f"Kubernetes {floor} or later (DRA ComputeDomains), and this aicluster pins "
                                    f"{version} (catalog/kubernetes.yaml)"))
    return problems


def _gke_problems(spec: ClusterSpec) -> list[Problem]:
    """scheduler: kubernetes on gcp builds GKE: node pools run GKE's Container-Optimized OS image
    (GKE installs the NVIDIA driver and device plugin; the Managed Lustre CSI driver needs COS)."""
    from aicluster.catalog.kubernetes import versions

    k8s, problems = spec.kubernetes, []
    accelerators = versions().gke.accelerators
    catalog = load_catalog()
    for i, pool in enumerate(spec.pools):
        if pool.image:
            problems.append(Problem(f"pools[{i}].image", pool.image,
                                    "leave it out with scheduler kubernetes: GKE node pools run GKE's "
                                    "Container-Optimized OS image, with the GPU driver GKE installs"))
        itype = catalog.resolve("gcp", pool.instance_type) if pool.instance_type else None
        if itype is not None and itype.name not in accelerators:
            problems.append(Problem(f"pools[{i}].instance_type", pool.instance_type,
                                    f"a GPU machine type GKE knows: {', '.join(accelerators)}"))
        # A multi-node GPU pool is placed COMPACT (its GPU NICs close; the policy pack requires it),
        # and GKE takes compact placement with flex-start only on A3 Ultra, A4 and H4D.
        gke = versions().gke
        if itype is not None and pool.capacity.type == "flex-start" and pool.max_nodes > 1 \
                and not gke.flex_start_compact_ok(itype.name):
            fits = [m for m in accelerators if gke.flex_start_compact_ok(m)]
            problems.append(Problem(f"pools[{i}].capacity.type", pool.capacity.type,
                                    f"on-demand, spot or reservation for a multi-node {itype.name} pool on GKE: "
                                    f"it is placed COMPACT, and GKE places flex-start node pools compact only on "
                                    f"A3 Ultra, A4 and H4D ({', '.join(fits)}); or max_nodes: 1"))
        # Flex-start pools use queued provisioning (k8s_capacity.py): GKE creates their nodes only
        # for a gang Kueue's ProvisioningRequest check admits, all at once; the pool starts empty.
        if pool.capacity.type == "flex-start" and pool.min_nodes:
            problems.append(Problem(f"pools[{i}].min_nodes", pool.min_nodes,
                                    "0 with flex-start on GKE: queued provisioning creates the pool's nodes only "
                                    "for a job Kueue admits, all of them at once (GKE docs, provisioningrequest: "
                                    "--enable-queued-provisioning --num-nodes=0)", "0"))
    problems += _nvlink_version_problems(spec, "gke", versions().gke.version)
    if k8s.gpu_devices != "nvidia-device-plugin":
        problems.append(Problem("kubernetes.gpu_devices", k8s.gpu_devices,
                                "nvidia-device-plugin (leave it out) on gcp: GKE installs the NVIDIA driver and "
                                "device plugin on GPU nodes itself"))
    if k8s.admins:
        problems.append(Problem("kubernetes.admins", list(k8s.admins),
                                "leave it out on gcp: GKE access is IAM (grant roles/container.admin or "
                                "roles/container.developer to people and groups in the project)"))
    for key in ("control_plane_zone", "control_plane_subnet_ids"):
        if key in k8s.model_fields_set:
            problems.append(Problem(f"kubernetes.{key}", getattr(k8s, key),
                                    "leave it out on gcp: the GKE control plane is regional and Google-managed"))
    problems += _system_nodes_problems(spec)
    problems += _api_cidr_problems(spec)
    problems += _api_access_problems(spec)
    problems += _gke_size_problems(spec)
    return problems


def _gke_size_problems(spec: ClusterSpec) -> list[Problem]:
    """GKE node pool names (a TPU pool of several slices has one per slice: <pool>-<k>) are unique
    and leave `system` to the system nodes; all nodes fit the cluster's pod range."""
    from aicluster.catalog.kubernetes import MAX_NODES, MAX_PODS_PER_NODE, POD_RANGE_PREFIX, SYSTEM_POOL
    from aicluster.catalog.tpu_slices import tpu_slice

    catalog = load_catalog()
    problems, owners = [], {SYSTEM_POOL: "the system node pool"}
    total = spec.kubernetes.system_nodes.count
    for i, pool in enumerate(spec.pools):
        total += pool.max_nodes
        names = [pool.name]
        gen = catalog.tpus.get(pool.tpu.type.lower()) if pool.tpu else None
        if gen is not None and pool.tpu.topology in gen.topologies:
            slices = pool.max_nodes // tpu_slice(gen, pool.tpu.topology).hosts
            names = [f"{pool.name}-{k}" for k in range(slices)] if slices > 1 else [pool.name]
        for name in names:
            if name in owners:
                problems.append(Problem(f"pools[{i}].name", pool.name, f"another name: its GKE node pool {name} "
                                        f"would clash with {owners[name]}"))
            owners.setdefault(name, f"pools[{i}]")
    if total > MAX_NODES:
        problems.append(Problem("pools", f"{total} nodes", f"at most {MAX_NODES} GKE nodes with the system nodes "
                                f"(the cluster's /{POD_RANGE_PREFIX} pod range at {MAX_PODS_PER_NODE} pods per node)"))
    return problems


def _location_problems(spec: ClusterSpec) -> list[Problem]:
    """The region is one of the cloud's regions and the zone one of its zones (catalog/regions.yaml,
    sourced and dated): a shape check alone let `us-east-3` plan."""
    from aicluster.catalog.regions import places

    known = places(spec.cloud)
    if spec.region not in known.zones:
        regions = known.regions()
        return [Problem("region", spec.region,
                        f"a region of {spec.cloud}, such as {_REGION_EXAMPLE[spec.cloud]} (one of the {len(regions)} "
                        f"regions aicluster knows, catalog/regions.yaml, checked {known.origin.checked})",
                        close_match(spec.region, regions))]
    zones = known.zones[spec.region]
    if spec.zone not in zones:
        return [Problem("zone", spec.zone, f"a zone inside region {spec.region}: {', '.join(zones)}",
                        close_match(spec.zone, zones))]
    return []


def _parse_cidr(text: str, path: str, problems: list[Problem]):
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError:
        try:
            fixed = ipaddress.ip_network(text, strict=False)
        except ValueError:
            problems.append(Problem(path, text, "an IPv4 CIDR such as 10.0.0.0/16"))
            return None
        problems.append(Problem(path, text, "a CIDR with no host bits set", str(fixed)))
        return None


def _network_problems(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    net = spec.network
    if net.existing and net.vpc_cidr:
        problems.append(Problem("network.vpc_cidr", net.vpc_cidr,
                                "leave it out when network.existing is set (the existing VPC keeps its CIDR)"))
    if net.vpc_cidr:
        vpc = _parse_cidr(net.vpc_cidr, "network.vpc_cidr", problems)
        if vpc is not None and (vpc.version != 4 or not 16 <= vpc.prefixlen <= 24 or not vpc.is_private):
            problems.append(Problem("network.vpc_cidr", net.vpc_cidr,
                                    "a private IPv4 range (RFC 1918) with a prefix from /16 to /24"))
    if net.existing and spec.cloud == "aws":
        for key, prefix in (("vpc_id", "vpc-"), ("subnet_id", "subnet-")):
            value = getattr(net.existing, key)
            if not re.fullmatch(prefix + r"[0-9a-f]{8,17}", value):
                problems.append(Problem(f"network.existing.{key}", value, f"an id such as {prefix}0123456789abcdef0"))
    parsed = [(i, _parse_cidr(text, f"network.ssh_ingress_cidrs[{i}]", problems))
              for i, text in enumerate(net.ssh_ingress_cidrs)]
    for i, j in _overlapping_cidrs([(i, cidr) for i, cidr in parsed if cidr is not None]):
        problems.append(Problem(f"network.ssh_ingress_cidrs[{i}]", net.ssh_ingress_cidrs[i],
                                f"CIDRs that do not overlap (it overlaps ssh_ingress_cidrs[{j}] {parsed[j][1]})"))
    return problems


def _overlapping_cidrs(cidrs: list[tuple[int, Any]]) -> list[tuple[int, int]]:
    """(i, j): CIDR i overlaps CIDR j (j < i), one pair per CIDR that overlaps another, in list
    order. O(n log n): two CIDRs overlap only when one contains the other, so in address order
    each overlaps an earlier one exactly when it starts before the widest end seen so far."""
    pairs = []
    ordered = sorted(cidrs, key=lambda c: (c[1].version, int(c[1].network_address), c[1].prefixlen, c[0]))
    cover: tuple[int, Any] | None = None    # the CIDR reaching furthest so far, in this IP version
    for i, cidr in ordered:
        if cover is not None and cover[1].version != cidr.version:
            cover = None
        if cover is not None and int(cidr.network_address) <= int(cover[1].broadcast_address):
            pairs.append((max(i, cover[0]), min(i, cover[0])))
        if cover is None or int(cidr.broadcast_address) > int(cover[1].broadcast_address):
            cover = (i, cidr)
    return sorted(pairs)


def _pool_problems(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    names: dict[str, int] = {}
    for i, pool in enumerate(spec.pools):
        at = f"pools[{i}]"
        if pool.name in names:
            problems.append(Problem(f"{at}.name", pool.name, f"a unique pool name (pools[{names[pool.name]}] "
                                                             "has the same name)"))
        names.setdefault(pool.name, i)
        if pool.min_nodes > pool.max_nodes:
            problems.append(Problem(f"{at}.min_nodes", pool.min_nodes,
                                    f"at most max_nodes ({pool.max_nodes})"))
        tpu_pool = pool.tpu is not None or pool.instance_type is None
        if tpu_pool:
            problems += _tpu_pool_problems(spec, i, pool)
        else:
            problems += _instance_type_problems(spec, at, pool)
            itype = load_catalog().resolve(spec.cloud, pool.instance_type)
            if itype is not None:
                problems += nvlink_domain_problems(spec.cloud, at, pool, itype, spec.scheduler)
        problems += _capacity_problems(spec, at, pool.capacity)
        if not tpu_pool:    # images and node names of instance types (TPU: _tpu_pool_problems)
            problems += _image_problems(spec, at, pool)
    return problems


# How each cloud sells a multi-node NVLink domain (GB200/GB300 NVL72): AWS P6e UltraServers only as
# EC2 Capacity Blocks, one block per UltraServer (EC2 user guide, "ec2-capacity-blocks"; AWS PCS
# user guide, "capacity-blocks-nvidia-imex"); GCP A4X by a reservation whose sub-block is one
# NVLink domain (Compute Engine docs, "a4x"; Cluster Toolkit examples/gke-a4x).
_NVLINK_DOMAIN_CAPACITY = {"aws": "capacity-block", "gcp": "reservation"}


def nvlink_domain_problems(cloud: str, at: str, pool: PoolSpec, itype: Any, scheduler: str = "slurm") -> list[Problem]:
    """A pool of a type whose NVLink domain spans nodes is exactly one domain (or one unit the
    cloud sells: a 9-node UltraServer on AWS), all of its nodes static, on the capacity type the
    cloud sells such domains through. Nothing to check for a single-node domain (HGX).

    One domain a pool, as every anchor has it: a ParallelCluster compute resource, an AWS PCS node
    group and an EKS node group each take one capacity block (one UltraServer), and a GKE A4X node
    pool one 1x72 placement policy (18 VMs, one sub-block). The pool's launch template or placement
    policy then fixes which domain its nodes are in, so the Slurm block of each node is known when
    the configuration is written. More domains: more pools naming the same `partition`.

    Static: capacity blocks and reservations are paid whether a node runs or not, IMEX's node list
    cannot change while it runs (AWS PCS user guide, capacity-blocks-nvidia-imex), and on Slurm 25.x
    a powered-down node leaves its block.
    Not on EKS: a capacity block's node group is created empty and scaled to the block when it
    starts (the EKS check asks min_nodes 0), and each job's ComputeDomain runs its own IMEX daemons."""
    if itype.nodes_per_nvlink_domain <= 1:
        return []
    unit, per_domain = itype.nvlink_capacity_unit, itype.nodes_per_nvlink_domain
    sizes = sorted({unit, per_domain})
    allowed = " or ".join(str(s) for s in sizes)
    what = (f"one NVLink domain: {allowed} {itype.name} nodes ({per_domain} nodes = {itype.nvlink_domain_gpus} GPUs"
            + (f"; {cloud} also sells {unit}-node UltraServers" if unit != per_domain else "") + "), one "
            + ("capacity block" if cloud == "aws" else "1x72 placement policy") + " a pool; for more "
            "domains add pools of the same `partition`")
    problems = []
    if pool.max_nodes not in sizes:
        near = min(sizes, key=lambda s: (abs(s - pool.max_nodes), s))
        if pool.max_nodes > per_domain and pool.max_nodes % per_domain == 0:
            what += f" ({pool.max_nodes // per_domain} pools of {per_domain})"
        problems.append(Problem(f"{at}.max_nodes", pool.max_nodes, what, str(near)))
    if pool.min_nodes != pool.max_nodes and not (cloud == "aws" and scheduler == "kubernetes"):
        problems.append(Problem(f"{at}.min_nodes", pool.min_nodes,
                                f"max_nodes ({pool.max_nodes}): every node of an NVLink domain is static (the "
                                "capacity is paid either way, IMEX's node list cannot change while it runs, and "
                                "a powered-down node leaves its Slurm block on 25.x)", str(pool.max_nodes)))
    needed = _NVLINK_DOMAIN_CAPACITY.get(cloud)
    if needed and pool.capacity.type != needed:
        how = ("one capacity block per UltraServer" if cloud == "aws"
               else "a reservation whose sub-block is one domain")
        problems.append(Problem(f"{at}.capacity.type", pool.capacity.type,
                                f"{needed}: {cloud} sells {itype.name} NVLink domains only so ({how})", needed))
    held = pool.capacity.nodes
    if held is not None and held != pool.max_nodes and pool.max_nodes in sizes:
        problems.append(Problem(f"{at}.capacity.nodes", held,
                                f"max_nodes ({pool.max_nodes}): the pool is its one domain", str(pool.max_nodes)))
    return problems


def _instance_type_problems(spec: ClusterSpec, at: str, pool: PoolSpec) -> list[Problem]:
    """An instance type of the spec's cloud, with a hint when it is another cloud's or a TPU; EFA
    only where the type has it."""
    catalog = load_catalog()
    itype = catalog.resolve(spec.cloud, pool.instance_type)
    if itype is None:
        other = "gcp" if spec.cloud == "aws" else "aws"
        hint = (f" ({pool.instance_type} is a {other} type)"
                if catalog.resolve(other, pool.instance_type) else "")
        if spec.cloud == "aws" and _names_a_tpu(pool.instance_type, catalog.tpus):
            hint = f" ({pool.instance_type} is a Cloud TPU: TPUs are GCP-only, use cloud: gcp)"
        elif spec.cloud == "gcp" and _names_a_tpu(pool.instance_type, catalog.tpus):
            hint = (f" ({pool.instance_type} is a Cloud TPU: write tpu: {{type: v5p, topology: 4x4x4}} "
                    "instead of instance_type)")
        return [Problem(f"{at}.instance_type", pool.instance_type,
                        f"an instance type or alias in the {spec.cloud} catalog{hint}: "
                        f"{', '.join(catalog.names(spec.cloud))}",
                        close_match(pool.instance_type, catalog.names(spec.cloud)))]
    if pool.efa and spec.cloud != "aws":
        return [Problem(f"{at}.efa", True, "only on aws (GCP GPU NICs come with the machine type)")]
    if pool.efa and not itype.efa_capable:
        return [Problem(f"{at}.efa", True, f"false: {itype.name} has no EFA")]
    return []


def _capacity_problems(spec: ClusterSpec, at: str, cap: CapacitySpec) -> list[Problem]:
    """A reservation id exactly where the capacity type takes one, in the cloud's own form; each
    cloud's own purchase options only."""
    problems = []
    needs_id = cap.type in ("reservation", "capacity-block")
    if needs_id and not cap.reservation_id:
        problems.append(Problem(f"{at}.capacity.reservation_id", None, f"required for capacity type {cap.type}"))
    if not needs_id and cap.nodes is not None:
        problems.append(Problem(f"{at}.capacity.nodes", cap.nodes,
                                "only with capacity type reservation or capacity-block (the instances it holds)"))
    if not needs_id and cap.reservation_id:
        problems.append(Problem(f"{at}.capacity.reservation_id", cap.reservation_id,
                                "only with capacity type reservation or capacity-block"))
    if needs_id and cap.reservation_id and spec.cloud == "aws" and \
            not re.fullmatch(r"cr-[0-9a-f]{8,17}", cap.reservation_id):
        problems.append(Problem(f"{at}.capacity.reservation_id", cap.reservation_id,
                                "an EC2 capacity reservation id such as cr-0123456789abcdef0"))
    if cap.type == "capacity-block" and spec.cloud != "aws":
        problems.append(Problem(f"{at}.capacity.type", cap.type, "capacity-block is an AWS purchase "
                                "option; on gcp use reservation or spot (or flex-start)"))
    if cap.type == "flex-start" and spec.cloud != "gcp":
        problems.append(Problem(f"{at}.capacity.type", cap.type, "flex-start is GCP's Dynamic Workload "
                                "Scheduler; on aws use capacity-block, reservation or spot"))
    if needs_id and cap.reservation_id and spec.cloud == "gcp" and \
            not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", cap.reservation_id):
        problems.append(Problem(f"{at}.capacity.reservation_id", cap.reservation_id,
                                "a Compute Engine reservation name such as a3u-reservation-1"))
    return problems


def _image_problems(spec: ClusterSpec, at: str, pool: PoolSpec) -> list[Problem]:
    """An image in the cloud's form; on GCP, node names within 63 characters and an image of one's
    own where no public image carries the NIC stack (Slurm)."""
    problems = []
    if pool.image and spec.cloud == "aws" and not re.fullmatch(r"ami-[0-9a-f]{8,17}|(resolve:ssm:)?/\S+",
                                                               pool.image):
        problems.append(Problem(f"{at}.image", pool.image, "an AMI id (ami-...) or an SSM parameter path (/aws/...)"))
    if pool.image and spec.cloud == "gcp" and not _GCP_IMAGE.fullmatch(pool.image):
        problems.append(Problem(f"{at}.image", pool.image, "a GCP image or image family such as "
                                "projects/my-project/global/images/family/my-a3-image"))
    if spec.cloud == "gcp" and len(f"{spec.name}-{pool.name}-{pool.max_nodes}") > 63:
        problems.append(Problem(f"{at}.name", pool.name, "a shorter cluster or pool name: GCP names each node's "
                                f"instance <cluster>-<pool>-<n>, at most 63 characters "
                                f"({spec.name}-{pool.name}-{pool.max_nodes} is longer)"))
    itype = load_catalog().resolve(spec.cloud, pool.instance_type)
    if spec.cloud == "gcp" and spec.scheduler == "slurm" and itype is not None and itype.image is None \
            and not pool.image:
        # TCPX needs a patched kernel; A4X is arm64 (Grace) while the catalog's accelerator image is amd64.
        what = "the TCPX kernel" if itype.gpu_nic_stack == "tcpx" else "an arm64 image with its NIC stack"
        problems.append(Problem(f"{at}.image", None, f"required for {itype.name}: no public image carries "
                                f"what its {itype.gpu_nic_stack} NICs need ({what}); name your image"))
    return problems


def _tpu_pool_problems(spec: ClusterSpec, i: int, pool: PoolSpec) -> list[Problem]:
    """A `tpu:` pool: gcp only, never with instance_type, a catalog generation and one of its
    topologies, whole slices of hosts, and only what a TPU host takes."""
    from aicluster.catalog.tpu_slices import topology_problem, tpu_slice

    at = f"pools[{i}]"
    if pool.tpu is None:
        return [Problem(f"{at}.instance_type", None, "this key is required (or tpu: {type, topology} "
                                                     "for a Cloud TPU slice on gcp)")]
    if pool.instance_type is not None:
        return [Problem(f"{at}.tpu", "<section>", f"either instance_type or tpu, not both (instance_type "
                                                  f"is {pool.instance_type})")]
    if spec.cloud != "gcp":
        return [Problem(f"{at}.tpu", "<section>", "cloud: gcp (Cloud TPUs are GCP-only; on aws use a GPU or "
                                                  "Trainium instance_type)")]
    generations = load_catalog().tpus
    gen = generations.get(pool.tpu.type.lower())
    if gen is None:
        return [Problem(f"{at}.tpu.type", pool.tpu.type, f"a TPU generation: {', '.join(generations)}",
                        close_match(pool.tpu.type, list(generations)))]
    why = topology_problem(gen, pool.tpu.topology)
    if why:
        return [Problem(f"{at}.tpu.topology", pool.tpu.topology, why, close_match(pool.tpu.topology, gen.topologies))]
    problems = []
    tpu = tpu_slice(gen, pool.tpu.topology)
    for key in ("max_nodes", "min_nodes"):
        value = getattr(pool, key)
        if value % tpu.hosts:
            lower, upper = value // tpu.hosts * tpu.hosts, -(-value // tpu.hosts) * tpu.hosts
            near = " or ".join(str(v) for v in (lower, upper) if v > 0 or key == "min_nodes")
            problems.append(Problem(f"{at}.{key}", value, f"whole slices: a multiple of {tpu.hosts} ({tpu.describe()})",
                                    near))
    if spec.scheduler == "slurm" and pool.min_nodes not in (0, pool.max_nodes):
        problems.append(Problem(f"{at}.min_nodes", pool.min_nodes,
                                f"0 or max_nodes ({pool.max_nodes}): on Slurm every slice is created by "
                                "Pulumi and always on", str(pool.max_nodes)))
    if spec.scheduler == "slurm" and tpu.machine_type not in gen.hosts:
        problems.append(Problem(f"{at}.tpu.type", pool.tpu.type,
                                f"a generation whose {tpu.machine_type} hosts' vCPUs and memory the catalog "
                                f"has ({', '.join(g.name for g in generations.values() if g.hosts)}): Slurm's "
                                "node lines need them; or scheduler: kubernetes"))
    for key in ("efa", "image"):
        if getattr(pool, key) is not None:
            problems.append(Problem(f"{at}.{key}", getattr(pool, key), "leave it out for a TPU pool (TPU hosts "
                                    "boot the TPU software version pinned in the catalog)"))
    if pool.capacity.type == "flex-start":
        problems.append(Problem(f"{at}.capacity.type", pool.capacity.type,
                                "on-demand, spot or reservation for a TPU slice"))
    return problems


def _names_a_tpu(name: str, generations) -> bool:
    """v5p, v5p-128, tpu-v5p-slice, ct5p-hightpu-4t, TPU v4: a Cloud TPU, not an AWS type."""
    lowered = name.lower().replace(" ", "-")
    return "tpu" in lowered or lowered.split("-")[0] in generations


def _storage_problems(spec: ClusterSpec) -> list[Problem]:
    problems: list[Problem] = []
    names: dict[str, int] = {}
    for i, fs in enumerate(spec.storage):
        at = f"storage[{i}]"
        if fs.name in names:
            problems.append(Problem(f"{at}.name", fs.name, f"a unique name (storage[{names[fs.name]}] has it)"))
        names.setdefault(fs.name, i)
        mount = fs.mount.rstrip("/") or "/"
        if mount in _RESERVED_MOUNTS or "/." in mount or "//" in fs.mount:
            problems.append(Problem(f"{at}.mount", fs.mount, "an absolute path outside the system "
                                    f"directories ({', '.join(sorted(_RESERVED_MOUNTS))}), such as /fsx"))
        if fs.type == "filestore" and spec.cloud != "gcp":
            problems.append(Problem(f"{at}.type", fs.type, "lustre, or efs for /home (filestore is Google Cloud Filestore, "
                                                           "gcp only)", "efs"))
        if fs.filestore_tier and fs.type != "filestore":
            problems.append(Problem(f"{at}.filestore_tier", fs.filestore_tier, "leave it out unless type is filestore"))
        problems += _efs_problems(spec, fs, at)
        scheme = "s3://" if spec.cloud == "aws" else "gs://"
        if fs.import_path and not re.fullmatch(re.escape(scheme) + r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/\S*)?",
                                               fs.import_path):
            problems.append(Problem(f"{at}.import_path", fs.import_path, f"a bucket URL such as {scheme}my-bucket/prefix"))
    return problems + _mount_overlap_problems(spec)


def _efs_problems(spec: ClusterSpec, fs: StorageSpec, at: str) -> list[Problem]:
    """EFS is the shared /home of an AWS Slurm cluster (components/aicluster/aws/home.py): elastic,
    so it takes no size and none of Lustre's settings; every other type needs its size."""
    if fs.type != "efs":
        return [] if fs.capacity_gib is not None else [
            Problem(f"{at}.capacity_gib", None, f"a size in GiB for type {fs.type}, such as 1200")]
    problems: list[Problem] = []
    if spec.cloud != "aws":
        problems.append(Problem(f"{at}.type", fs.type, "lustre or filestore (efs is Amazon EFS, aws only)", "filestore"))
    elif spec.scheduler != "slurm":
        problems.append(Problem(f"{at}.type", fs.type, "lustre (efs is the shared /home of a Slurm cluster; "
                                                       "EKS mounts FSx for Lustre only)", "lustre"))
    if fs.capacity_gib is not None:
        problems.append(Problem(f"{at}.capacity_gib", fs.capacity_gib, "leave it out for type efs (EFS grows "
                                                                       "and shrinks with its files)"))
    for key in ("throughput_mbps_per_tib", "deployment_type", "import_path"):   # filestore_tier: checked above
        if key in fs.model_fields_set and getattr(fs, key) is not None:
            problems.append(Problem(f"{at}.{key}", getattr(fs, key), "leave it out for type efs"))
    return problems


def _mount_overlap_problems(spec: ClusterSpec) -> list[Problem]:
    """Mount points that are equal or nest, one problem per mount that does, at the later one.
    O(n log n): in path order a mount's nearest enclosing mount is on the stack of open ones."""
    mounts = sorted((tuple(p for p in fs.mount.split("/") if p), i) for i, fs in enumerate(spec.storage))
    pairs, open_mounts = [], []
    for parts, i in mounts:
        while open_mounts and open_mounts[-1][0] != parts[:len(open_mounts[-1][0])]:
            open_mounts.pop()
        if open_mounts:
            pairs.append((max(i, open_mounts[-1][1]), min(i, open_mounts[-1][1])))
        open_mounts.append((parts, i))
    return [Problem(f"storage[{i}].mount", spec.storage[i].mount, f"a mount point that does not overlap "
                    f"storage[{j}].mount ({spec.storage[j].mount.rstrip('/') or '/'})") for i, j in sorted(pairs)]


# Tag and label keys aicluster sets itself (aicluster-cluster, -role, -pool, -node, -resume-id, the
# pool facts) and reads back: the power programs find a node's instance by aicluster-node.
RESERVED_TAG_PREFIX = "aicluster-"


def reserved_tag_problem(key: str, at: str) -> Problem | None:
    """A user tag key aicluster or the cloud keeps for itself: aws: (AWS's own), or aicluster- as
    written or once it is a GCP label (aicluster.node, AICLUSTER:node and `aicluster node` all
    become the label aicluster-node). Checked on both clouds, so a spec moves between them whole."""
    label = _gcp_label_key(key)
    if key.lower().startswith("aws:"):
        return Problem(at, key, "a key not starting with aws: or aicluster- (reserved: aws: for AWS's own tags)")
    if label.startswith(RESERVED_TAG_PREFIX):   # lower-cased: Aicluster-x too
        became = "" if label == key else f"; {key} becomes the GCP label {label}"
        return Problem(at, key, f"a key not starting with aws: or aicluster- (reserved: aicluster- for the tags "
                                f"aicluster sets and reads back, such as aicluster-node and aicluster-pool{became})")
    return None


def _tag_problems(spec: ClusterSpec) -> list[Problem]:
    problems = [p for key in spec.tags if (p := reserved_tag_problem(key, f"tags.{key}")) is not None]
    return problems + _tag_limit_problems(spec)


# Tags aicluster itself puts on one resource, at most: cluster, role, pool, the pool's size (2), the
# workload hints (3), the workload's model and training set-up (aicluster-model, aicluster-training),
# the GCP zone label, and the node name the resume programs add at boot (12).
# The contracts suite (tests/contracts) plans the most user tags allowed and checks every resource.
AICLUSTER_TAGS = 12
# Tag keys in the alphabet both every AWS service (IAM, S3, Secrets Manager, EKS, FSx take letters,
# digits, spaces and _ . : / = + - @) and instance-metadata tags (letters, digits, + - = . , _ : @; no
# space, no /) accept: the launch templates make tags readable in instance metadata.
_AWS_TAG_KEY = re.compile(r"[A-Za-z0-9+\-=._:@]+")
_AWS_TAG_VALUE_EXTRA = set("_.:/=+-@")


def user_tag_budget(cloud: str) -> int:
    """How many user tags the spec takes: the cloud's per-resource limit (AWS 50 tags, GCP 64
    labels; catalog/limits.yaml) less the ones aicluster sets itself."""
    from aicluster.catalog import load_limits

    limit = load_limits()["aws_tags_per_resource" if cloud == "aws" else "gcp_labels_per_resource"]
    return int(limit.value) - AICLUSTER_TAGS


def _aws_tag_value_ok(value: str) -> bool:
    import unicodedata

    return all(c in _AWS_TAG_VALUE_EXTRA or unicodedata.category(c)[0] in "LNZ" for c in value)


def _gcp_label_key(key: str) -> str:
    """The label a tag key becomes on GCP (the spec's copy of gcp.common.label_key, which the spec
    may not import; tests/contracts checks that the two agree)."""
    label = re.sub(r"[^a-z0-9_-]", "-", key.lower())[:63]
    return label if label[:1].isalpha() else f"x-{label}"[:63]


def _tag_limit_problems(spec: ClusterSpec) -> list[Problem]:
    """The clouds' tag rules a routine edit of `tags` could cross (catalog/limits.yaml): how many fit
    beside aicluster's own, and on AWS the characters every tagged service accepts. GCP labels are
    lower-cased and their other characters turned into `-`, so two keys must not become one label."""
    budget = user_tag_budget(spec.cloud)
    problems = []
    if len(spec.tags) > budget:
        limit = "50 tags per AWS resource" if spec.cloud == "aws" else "64 labels per GCP resource"
        problems.append(Problem("tags", f"{len(spec.tags)} tags", f"at most {budget} tags ({limit}, "
                                f"{AICLUSTER_TAGS} of them kept for aicluster's own)"))
    labels: dict[str, str] = {}
    for key, value in spec.tags.items():
        if spec.cloud == "aws":
            if not _AWS_TAG_KEY.fullmatch(key) or key in (".", "..", "_index"):
                fixed = re.sub(r"[^A-Za-z0-9+\-=._:@]", "-", key)
                problems.append(Problem(f"tags.{key}", key, "a key of letters, digits and + - = . _ : @ (no spaces "
                                        "or /: EC2 instance-metadata tags refuse them; not . .. or _index)",
                                        fixed if fixed != key else None))
            if not _aws_tag_value_ok(value):
                problems.append(Problem(f"tags.{key}", value, "a value of letters, digits, spaces and "
                                        "_ . : / = + - @ (what IAM, S3, Secrets Manager, EKS and FSx tags accept)"))
        else:
            label = _gcp_label_key(key)
            if label in labels:
                problems.append(Problem(f"tags.{key}", key, f"a key that stays distinct as a GCP label: it and "
                                        f"tags.{labels[label]} both become the label {label}"))
            labels.setdefault(label, key)
    return problems
