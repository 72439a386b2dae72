"""The one way aicluster reaches a real stack: Pulumi's Automation API (it ships in the `pulumi`
package and drives the Pulumi CLI the user installs). `up`, `preview`, `status` and `destroy`
(commands/deploy.py, commands/teardown.py) open their stack here; nothing else imports
pulumi.automation, so every other command works with no Pulumi CLI installed.

Tests replace `open_stack` through `STACK_OPENER` with a fake that records the calls; the real
opener is the only code that needs the CLI.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from aicluster.errors import Problem, SpecError

INSTALL_HINT = "install it: curl -fsSL https://get.pulumi.com | sh (https://www.pulumi.com/docs/install/)"


@dataclass(frozen=True)
class StackRef:
    """Which stack of which project: the folder holding Pulumi.yaml and the stack's name."""
    project_dir: Path
    stack: str


def pulumi_cli() -> str:
    """The Pulumi CLI's path, or a SpecError that says how to install it (exit 2, no traceback)."""
    found = shutil.which("pulumi", path=os.environ.get("PATH"))
    if not found:
        raise SpecError([Problem("pulumi", None, f"the Pulumi CLI on PATH to deploy ({INSTALL_HINT}); "
                                                 "plan, check, diff and preflight need no CLI")],
                        subject="environment")
    return found


def _real_opener(ref: StackRef, create: bool) -> Any:
    pulumi_cli()
    from pulumi import automation

    if create:
        return automation.create_or_select_stack(ref.stack, work_dir=str(ref.project_dir))
    return automation.select_stack(ref.stack, work_dir=str(ref.project_dir))


# (StackRef, create) -> an object with the automation Stack's methods (up, preview, destroy,
# outputs, export_stack, import_stack, ...). Tests swap it for a fake.
STACK_OPENER: Callable[[StackRef, bool], Any] = _real_opener


def open_stack(ref: StackRef, create: bool = False) -> Any:
    """The automation Stack for `ref`: selected, or created when `create` (the first `up`)."""
    return STACK_OPENER(ref, create)
