"""aicluster: one cluster spec -> a balanced AI training cluster on AWS or GCP, with Pulumi.

The package's layers, each importing only those before it: errors, catalog, mounts -> spec ->
design -> render -> aws | gcp (Pulumi components, `from aicluster.aws import GpuPool, GpuPoolArgs`)
-> cluster (the program) -> offline, cli.
"""
__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # __version__ looked up on first use: reading the installed distributions takes ~4 ms, and a
    # plan never asks for it.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata
    try:
        version = metadata.version("aicluster")
    except metadata.PackageNotFoundError:   # imported from a checkout that was never installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version
