"""aicluster's Pulumi components for GCP, each with its Args:
`from aicluster.gcp import GpuPool, GpuPoolArgs` in any Pulumi program.

Exports load their module on first use (aicluster.lazy), so a program that builds a Slurm cluster never
imports the Kubernetes modules and their SDK.

May import: the shared components (aicluster.kubernetes, aicluster.slurm), render, design, spec,
catalog, the base modules, Pulumi and pulumi_gcp. Never aws, the program, offline or the commands.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from aicluster.lazy import lazy_exports

# exported name -> the module that defines it
_EXPORTS = {
    "Network": "network",
    "NetworkArgs": "network",
    "NodeIdentity": "identity",
    "NodeIdentityArgs": "identity",
    "GpuPool": "gpu_pool",
    "GpuPoolArgs": "gpu_pool",
    "TpuSlice": "tpu_slice",
    "TpuSliceArgs": "tpu_slice",
    "ManagedLustre": "storage",
    "ManagedLustreArgs": "storage",
    "Filestore": "storage",
    "FilestoreArgs": "storage",
    "SlurmController": "slurm",
    "SlurmControllerArgs": "slurm",
    "SlurmConfiguration": "slurm",
    "SlurmConfigurationArgs": "slurm",
    "LoginNodes": "login",
    "LoginNodesArgs": "login",
    "SlurmdbdDatabase": "accounting_db",
    "SlurmdbdDatabaseArgs": "accounting_db",
    "GkeCluster": "gke",
    "GkeClusterArgs": "gke",
    "GkeNodePools": "gke_nodes",
    "GkeNodePoolArgs": "gke_nodes",
    "GkeAddons": "gke_addons",
    "GkeAddonsArgs": "gke_addons",
    "WorkloadIdentities": "workload_identity",
    "WorkloadIdentitiesArgs": "workload_identity",
    "ObservabilityBackend": "observability",
    "ObservabilityBackendArgs": "observability",
    "ClusterBudget": "budget",
    "ClusterBudgetArgs": "budget",
    "NodeImage": "image",
    "NodeImageArgs": "image",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from aicluster.gcp.network import Network, NetworkArgs
    from aicluster.gcp.identity import NodeIdentity, NodeIdentityArgs
    from aicluster.gcp.gpu_pool import GpuPool, GpuPoolArgs
    from aicluster.gcp.tpu_slice import TpuSlice, TpuSliceArgs
    from aicluster.gcp.storage import ManagedLustre, ManagedLustreArgs, Filestore, FilestoreArgs
    from aicluster.gcp.slurm import SlurmController, SlurmControllerArgs, SlurmConfiguration, SlurmConfigurationArgs
    from aicluster.gcp.login import LoginNodes, LoginNodesArgs
    from aicluster.gcp.accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
    from aicluster.gcp.gke import GkeCluster, GkeClusterArgs
    from aicluster.gcp.gke_nodes import GkeNodePools, GkeNodePoolArgs
    from aicluster.gcp.gke_addons import GkeAddons, GkeAddonsArgs
    from aicluster.gcp.workload_identity import WorkloadIdentities, WorkloadIdentitiesArgs
    from aicluster.gcp.budget import ClusterBudget, ClusterBudgetArgs
    from aicluster.gcp.observability import ObservabilityBackend, ObservabilityBackendArgs
    from aicluster.gcp.image import NodeImage, NodeImageArgs


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
