"""The workload-aware training model: FLOPs, memory and step time of a model on a cluster, the
layout search, and time and cost to train (docs/training-model.md). Pure; no Pulumi, no spec
parsing. Used by `aicluster estimate`, the plan and the policy pack.

May import: aicluster.errors and aicluster.catalog only (the policy pack loads it).
"""
from __future__ import annotations

from aicluster.perf.estimate import estimate
from aicluster.perf.hardware import from_instance, from_tpu, what_if
from aicluster.perf.result import BOUNDS, Breakdown, Candidate, Checkpoint, DataLoading, Estimate, Memory
from aicluster.perf.shapes import Hardware, Layout, LayoutHint, Moe, ModelShape, Storage, TrainingShape

__all__ = ["BOUNDS", "Breakdown", "Candidate", "Checkpoint", "DataLoading", "Estimate", "Hardware", "Layout",
           "LayoutHint", "Memory", "Moe", "ModelShape", "Storage", "TrainingShape", "estimate", "from_instance",
           "from_tpu", "what_if"]
