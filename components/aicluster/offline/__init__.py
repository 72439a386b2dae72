"""Offline planning: run the real Pulumi program against a fake cloud and capture the result.

    from aicluster.offline import run_program, resource_tree
    plan = run_program(program, stack="dev", config={"aws:region": "us-west-2"})
    print("\\n".join(resource_tree(plan)))
"""
from .capture import UNKNOWN, CapturedResource, LogEntry, Plan, Secret
from .engine import DuplicateResourceError, encode_config, run_program
from .mocks import FakeCloud, OfflineInvokeError
from .report import resource_table_markdown, resource_tree

__all__ = [
    "UNKNOWN",
    "CapturedResource",
    "DuplicateResourceError",
    "FakeCloud",
    "LogEntry",
    "OfflineInvokeError",
    "Plan",
    "Secret",
    "encode_config",
    "resource_table_markdown",
    "resource_tree",
    "run_program",
]
