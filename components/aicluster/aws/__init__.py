"""aicluster's Pulumi components for AWS, each with its Args:
`from aicluster.aws import GpuPool, GpuPoolArgs` in any Pulumi program.

Exports load their module on first use (aicluster.lazy), so a program that builds a Slurm cluster never
imports the Kubernetes modules and their SDK.

May import: the shared components (aicluster.kubernetes, aicluster.slurm), render, design, spec,
catalog, the base modules, Pulumi and pulumi_aws. Never gcp, the program, offline or the commands.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from aicluster.lazy import lazy_exports

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
    "ClusterBudget": "budget",
    "ClusterBudgetArgs": "budget",
    "CollectorIdentity": "observability",
    "CollectorIdentityArgs": "observability",
    "NodeImage": "image",
    "NodeImageArgs": "image",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from aicluster.aws.network import Network, NetworkArgs
    from aicluster.aws.iam import NodeIdentity, NodeIdentityArgs
    from aicluster.aws.gpu_pool import GpuPool, GpuPoolArgs
    from aicluster.aws.storage import LustreFilesystem, LustreFilesystemArgs
    from aicluster.aws.home import HomeFilesystem, HomeFilesystemArgs
    from aicluster.aws.slurm import SlurmController, SlurmControllerArgs, SlurmNodeFiles, SlurmNodeFilesArgs, SlurmConfiguration, SlurmConfigurationArgs
    from aicluster.aws.login import LoginNodes, LoginNodesArgs
    from aicluster.aws.accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
    from aicluster.aws.eks import EksCluster, EksClusterArgs
    from aicluster.aws.eks_nodes import EksNodeGroup, EksNodeGroupArgs
    from aicluster.aws.eks_addons import KubernetesAddons, KubernetesAddonsArgs
    from aicluster.aws.karpenter import Karpenter, KarpenterArgs
    from aicluster.aws.pod_identity import PodIdentities, PodIdentitiesArgs
    from aicluster.aws.budget import ClusterBudget, ClusterBudgetArgs
    from aicluster.aws.observability import CollectorIdentity, CollectorIdentityArgs, ObservabilityBackend, ObservabilityBackendArgs
    from aicluster.aws.image import NodeImage, NodeImageArgs


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
