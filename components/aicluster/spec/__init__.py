"""spec: raw YAML -> a validated ClusterSpec, or a SpecError that names the path.

Owns: the cluster spec's models and checks (cluster.py), and the per-concern sections it is built
from: the workload (workload.py), the login nodes (login.py), pod identities and datasets
(pod_identity.py), custom Slurm settings (slurm_settings.py); reading a user's files with bounds
(input_files.py).
May import: aicluster.errors, limits, resources, mounts, lazy, and aicluster.catalog. Never a
design, a renderer or Pulumi.
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
