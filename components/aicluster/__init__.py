"""aicluster: one cluster spec -> a balanced AI training cluster on AWS or GCP, with Pulumi.

The package's layers, each importing only those before it: errors, catalog, mounts -> spec ->
design -> render -> aws | gcp (Pulumi components, `from aicluster.aws import GpuPool, GpuPoolArgs`)
-> cluster (the program) -> offline, cli.
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("aicluster")
except _metadata.PackageNotFoundError:   # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
