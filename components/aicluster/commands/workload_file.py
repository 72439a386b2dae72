"""Reading what `aicluster estimate FILE` estimates: a workload and the cluster(s) it runs on.

FILE is either
- a workload file: the spec's `workload` sections at the top (model, training, parallelism, ...)
  plus `cluster:` (a stack, a spec file or a what-if) and, for --compare, `clusters: [...]`; or
- a stack file or bare spec file whose `workload` section describes a model: the workload runs on
  that cluster.
Every problem is a SpecError at its YAML path; files are read bounded (input_files via stacks).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from aicluster.design.cluster import design_cluster
from aicluster.errors import Problem, SpecError, close_match
from aicluster.spec.input_files import load_yaml, read_text
from aicluster.perf import Hardware, Storage, what_if
from aicluster.spec.cluster import WorkloadSpec, parse_spec, validation_problems, workload_problems
from aicluster.commands.stacks import read_stack, stack_names, stacks_dir
from aicluster.design.standing_cost import standing_cost
from aicluster.design.workload import hardware, storage
from aicluster.spec.workload import SpecModel

# Clusters one --compare ranks: each is designed (stacks) or built from the catalog (what-ifs);
# far more than anyone compares at once, few enough to answer in seconds.
MAX_CLUSTERS = 32

Text = Annotated[str, Field(strict=True, min_length=1, max_length=256)]


class HardwareRef(SpecModel):
    """A cluster that exists only on paper."""

    accelerator: Text = Field(description="An accelerator alias (h100, h200, b200, a100, trainium2, ...) or a "
                                          "TPU generation (v4, v5e, v5p, v6e), as `aicluster catalog` lists.")
    nodes: Annotated[int, Field(strict=True, ge=1, le=100_000)] = Field(
        description="Nodes of the alias's instance type (TPU: hosts of 4 chips, one slice).")
    inter_node_gbps_per_node: Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)] | None = Field(
        None, description="Inter-node fabric wired per node, Gbps. Default: all the instance type has.")


class ClusterRef(SpecModel):
    """Where the workload runs: exactly one of stack, spec or hardware."""

    stack: Text | None = Field(None, description="A stack in stacks/ (aws-p5-slurm).")
    spec: Text | None = Field(None, description="A stack file or bare spec file, relative to the workload file.")
    hardware: HardwareRef | None = Field(None, description="A what-if: an accelerator and a node count.")


class WorkloadFile(WorkloadSpec):
    """A workload file: the spec's workload sections, and the clusters to estimate it on."""

    cluster: ClusterRef | None = Field(None, description="The cluster to estimate on.")
    clusters: tuple[ClusterRef, ...] = Field((), max_length=MAX_CLUSTERS,
                                             description="More clusters to rank with --compare.")


@dataclass(frozen=True)
class Cluster:
    """A cluster the workload can be estimated on."""

    label: str                  # aws-p5-slurm, specs/mine.yaml, what-if 16 x h100
    kind: str                   # stack | spec | what-if
    hardware: Hardware
    storage: Storage | None
    warnings: tuple[str, ...]
    standing_usd_per_hour: float | None = None    # what a designed cluster pays beside its accelerators

    def to_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "hardware": dataclasses.asdict(self.hardware),
                "storage": None if self.storage is None else dataclasses.asdict(self.storage),
                "standing_usd_per_hour": self.standing_usd_per_hour}


@dataclass(frozen=True)
class WorkloadRequest:
    """What FILE asks: one workload, the cluster to estimate it on and those to compare."""

    source: str
    workload: WorkloadSpec
    prefix: str                          # where the workload's sections sit: "" or "workload."
    cluster: Cluster | None
    clusters: tuple[Cluster, ...]        # from `clusters:`, for --compare

    @property
    def all_clusters(self) -> tuple[Cluster, ...]:
        return ((self.cluster,) if self.cluster else ()) + self.clusters


def read_workload(path: str) -> WorkloadRequest:
    """The workload and clusters FILE names, or a SpecError naming each problem's YAML path."""
    doc = load_yaml(read_text(path, arg="FILE", what="workload, stack or spec YAML file", subject="workload"),
                    path, subject="workload")
    if isinstance(doc, dict) and ({"config", "cloud", "pools"} & set(doc)):
        return _from_cluster_file(path)
    return read_workload_data(doc, path)


def _from_cluster_file(path: str) -> WorkloadRequest:
    """A stack or spec file: its own workload on its own cluster."""
    target = path if os.sep in path or path.endswith((".yaml", ".yml")) else os.path.join(os.curdir, path)
    cluster, workload = _designed(target, label=None)
    if workload is None or workload.model is None:
        raise SpecError([Problem("workload.model", None, "a model section (layers, hidden, heads, ffn_hidden, vocab, "
                                 "seq_len) in the workload: the training model needs the architecture, "
                                 "model_params_b alone gives no step time")], source=path, subject="workload")
    return WorkloadRequest(path, workload, "workload.", cluster, ())


def read_workload_data(doc: Any, path: str) -> WorkloadRequest:
    """A workload file's parsed YAML (`path` names it in messages and anchors `spec:` paths)."""
    try:
        wf = WorkloadFile.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(validation_problems(exc, WorkloadFile), path, "workload") from None
    except RecursionError:
        raise SpecError([Problem("", "<deeply nested value>", "the workload file nests too deeply")], path,
                        "workload") from None
    problems = workload_problems(wf, "")
    if wf.model is None and not problems:
        problems.append(Problem("model", None, "a model section (layers, hidden, heads, ffn_hidden, vocab, seq_len): "
                                "model_params_b alone gives no step time"))
    if wf.cluster is None and not wf.clusters:
        problems.append(Problem("cluster", None, "where to estimate: {stack: NAME}, {spec: PATH} or "
                                "{hardware: {accelerator: h100, nodes: 16}}"))
    if problems:
        raise SpecError(problems, path, "workload")
    base = os.path.dirname(path) or os.curdir
    cluster = None if wf.cluster is None else _resolve(wf.cluster, "cluster", base, wf)
    clusters = tuple(_resolve(ref, f"clusters[{i}]", base, wf) for i, ref in enumerate(wf.clusters))
    workload = WorkloadSpec.model_validate(wf.model_dump(include=set(WorkloadSpec.model_fields)))
    return WorkloadRequest(path, workload, "", cluster, clusters)


def _resolve(ref: ClusterRef, at: str, base: str, workload: WorkloadSpec) -> Cluster:
    given = [key for key in ("stack", "spec", "hardware") if getattr(ref, key) is not None]
    if len(given) != 1:
        raise SpecError([Problem(at, given or "<empty>", "exactly one of stack: NAME, spec: PATH or "
                                 "hardware: {accelerator, nodes}")], subject="workload")
    if ref.hardware is not None:
        hw = what_if(ref.hardware.accelerator, ref.hardware.nodes, ref.hardware.inter_node_gbps_per_node,
                     at=f"{at}.hardware")
        # No region on paper: the price is the reference one (us-east-1 / us-central1 on-demand); say so.
        priced = (f"what-if: {hw.price_basis}",) if hw.price_basis else ()
        return Cluster(f"what-if {ref.hardware.nodes} x {ref.hardware.accelerator}", "what-if", hw, None,
                       ("what-if: no filesystem, so checkpoint writes and data loading are not checked against storage",
                        *priced))
    if ref.stack is not None:
        names = stack_names()
        if ref.stack not in names:
            raise SpecError([Problem(f"{at}.stack", ref.stack, f"a stack in {stacks_dir()}: {', '.join(names)} "
                                     "(or spec: PATH for a file)", close_match(ref.stack, names))], subject="workload")
        return _designed(ref.stack, label=ref.stack, workload=workload)[0]
    target = os.path.join(base, ref.spec)
    if not os.path.isfile(target):
        raise SpecError([Problem(f"{at}.spec", ref.spec, f"a stack or spec YAML file, relative to the workload file "
                                 f"(there is no file {target})")], subject="workload")
    if not target.endswith((".yaml", ".yml")) and os.sep not in target:
        target = os.path.join(os.curdir, target)
    return _designed(target, label=ref.spec, workload=workload)[0]


def _designed(target: str, label: str | None, workload: WorkloadSpec | None = None
              ) -> tuple[Cluster, WorkloadSpec | None]:
    """A stack or spec file designed as `aicluster plan` would (without running the program): its
    largest accelerator pool and fastest filesystem. Checkpoint settings from `workload`, else
    the file's own."""
    stack = read_stack(target)
    source = str(stack.path)
    spec = parse_spec(stack.spec_data, source=source)
    try:
        design = design_cluster(spec)
        hw, warnings = hardware(design)
        fs = storage(design, workload)
    except SpecError as exc:
        raise exc.with_source(source) from None
    kind = "stack" if Path(source).name.startswith("Pulumi.") else "spec"
    return Cluster(label or stack.name, kind, hw, fs, warnings, standing_cost(design).usd_per_hour), spec.workload
