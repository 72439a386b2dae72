"""design: ClusterSpec + catalog -> ClusterDesign. Pure: no Pulumi, no cloud calls, no I/O.

Owns: the cluster's design (cluster.py: pools, fabric, network, storage, the Slurm shape), its
per-concern slices (accounting, login, kubernetes/EKS, gke, pod_identity, observability,
telemetry_backend, zone_subnets), the provisioning critical path, the training model's inputs from
a spec (workload.py), and the two models the policy pack shares: balance.py and stateful.py.
May import: spec, perf, catalog and the base modules. balance.py and stateful.py import nothing
above the catalog (the policy pack loads them).
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
