"""kubernetes: what EKS and GKE clusters create inside Kubernetes the same way, through
pulumi_kubernetes: capacity (Karpenter NodePools, Kueue, queued provisioning), the GPU health agent,
metrics, the pods' identities and datasets, the example JobSet, the NVLink domains' DRA driver and
Kueue topology (nvlink), and typed objects from manifests.

May import: render, design, spec, catalog and the base modules. aws and gcp import it, never the
reverse.
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
