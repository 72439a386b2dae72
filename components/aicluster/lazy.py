"""Package exports that import their module on first use (PEP 562 module __getattr__).

`from aicluster.aws import GpuPool` then imports only aws/gpu_pool.py: a program that builds a
Slurm cluster never imports the Kubernetes modules and their SDK (see bench/, import floor).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """__getattr__ and __dir__ for `package`, whose exported names live in the given submodules."""
    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{exports[name]}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
