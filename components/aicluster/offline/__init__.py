"""Offline planning: run the real Pulumi program against a fake cloud and capture the result.

    from aicluster.offline import run_program, resource_tree
    plan = run_program(program, stack="dev", config={"aws:region": "us-west-2"})
    print("\\n".join(resource_tree(plan)))

May import: the program (aicluster.cluster) and everything below it, and the policy pack through
its own files (policy_bridge). Never the commands or the CLI.
"""
from aicluster.offline.capture import UNKNOWN, CapturedResource, LogEntry, Plan, Secret
from aicluster.offline.engine import DuplicateResourceError, encode_config, run_program
from aicluster.offline.mocks import FakeCloud, OfflineInvokeError
from aicluster.offline.report import resource_table_markdown, resource_tree

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
