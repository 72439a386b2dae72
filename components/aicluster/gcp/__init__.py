"""aicluster's Pulumi components for GCP, each with its Args:
`from aicluster.gcp import GpuPool, GpuPoolArgs` in any Pulumi program.

Exports load their module on first use (aicluster.lazy), so a program that builds a Slurm cluster never
imports the Kubernetes modules and their SDK.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

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
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .network import Network, NetworkArgs
    from .identity import NodeIdentity, NodeIdentityArgs
    from .gpu_pool import GpuPool, GpuPoolArgs
    from .tpu_slice import TpuSlice, TpuSliceArgs
    from .storage import ManagedLustre, ManagedLustreArgs, Filestore, FilestoreArgs
    from .slurm import SlurmController, SlurmControllerArgs, SlurmConfiguration, SlurmConfigurationArgs
    from .login import LoginNodes, LoginNodesArgs
    from .accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
    from .gke import GkeCluster, GkeClusterArgs
    from .gke_nodes import GkeNodePools, GkeNodePoolArgs
    from .gke_addons import GkeAddons, GkeAddonsArgs
    from .workload_identity import WorkloadIdentities, WorkloadIdentitiesArgs
    from .observability import ObservabilityBackend, ObservabilityBackendArgs


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
