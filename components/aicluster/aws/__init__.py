"""aicluster's Pulumi components for AWS, each with its Args:
`from aicluster.aws import GpuPool, GpuPoolArgs` in any Pulumi program.

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
    "NodeIdentity": "iam",
    "NodeIdentityArgs": "iam",
    "GpuPool": "gpu_pool",
    "GpuPoolArgs": "gpu_pool",
    "LustreFilesystem": "storage",
    "LustreFilesystemArgs": "storage",
    "HomeFilesystem": "home",
    "HomeFilesystemArgs": "home",
    "SlurmController": "slurm",
    "SlurmControllerArgs": "slurm",
    "SlurmNodeFiles": "slurm",
    "SlurmNodeFilesArgs": "slurm",
    "SlurmConfiguration": "slurm",
    "SlurmConfigurationArgs": "slurm",
    "LoginNodes": "login",
    "LoginNodesArgs": "login",
    "SlurmdbdDatabase": "accounting_db",
    "SlurmdbdDatabaseArgs": "accounting_db",
    "EksCluster": "eks",
    "EksClusterArgs": "eks",
    "EksNodeGroup": "eks_nodes",
    "EksNodeGroupArgs": "eks_nodes",
    "KubernetesAddons": "eks_addons",
    "KubernetesAddonsArgs": "eks_addons",
    "Karpenter": "karpenter",
    "KarpenterArgs": "karpenter",
    "PodIdentities": "pod_identity",
    "PodIdentitiesArgs": "pod_identity",
    "ObservabilityBackend": "observability",
    "ObservabilityBackendArgs": "observability",
    "CollectorIdentity": "observability",
    "CollectorIdentityArgs": "observability",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .network import Network, NetworkArgs
    from .iam import NodeIdentity, NodeIdentityArgs
    from .gpu_pool import GpuPool, GpuPoolArgs
    from .storage import LustreFilesystem, LustreFilesystemArgs
    from .home import HomeFilesystem, HomeFilesystemArgs
    from .slurm import SlurmController, SlurmControllerArgs, SlurmNodeFiles, SlurmNodeFilesArgs, SlurmConfiguration, SlurmConfigurationArgs
    from .login import LoginNodes, LoginNodesArgs
    from .accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
    from .eks import EksCluster, EksClusterArgs
    from .eks_nodes import EksNodeGroup, EksNodeGroupArgs
    from .eks_addons import KubernetesAddons, KubernetesAddonsArgs
    from .karpenter import Karpenter, KarpenterArgs
    from .pod_identity import PodIdentities, PodIdentitiesArgs
    from .observability import CollectorIdentity, CollectorIdentityArgs, ObservabilityBackend, ObservabilityBackendArgs


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
