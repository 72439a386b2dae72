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


def add_stack_arguments(parser: Any) -> None:
    """The arguments that say which stack a lifecycle command means (resolve with `stack_ref`)."""
    parser.add_argument("--stack", "-s", metavar="NAME",
                        help="the stack (Pulumi.<NAME>.yaml in the project); default: the project's only stack")
    parser.add_argument("--cwd", "-C", metavar="DIR", type=Path,
                        help="the project's folder (one holding Pulumi.yaml), default: the working directory "
                             "or the nearest folder above it with an aicluster Pulumi.yaml")


def resolve_stack(stack: str | None = None, start: str | Path | None = None) -> StackRef:
    """Which project and stack a command means: the nearest aicluster project at or above `start`
    (default: the working directory; this checkout's own project when aicluster runs from a
    checkout and no project is nearer), and `stack` in it, or its only stack. Anything else is a
    SpecError (exit 2) naming what there is."""
    from aicluster.commands.stacks import find_project

    if start is not None and not Path(start).is_dir():
        raise SpecError.one("--cwd", str(start), "a folder holding a Pulumi project (Pulumi.yaml)",
                            subject="argument")
    project = find_project(start)
    if project is None:
        raise SpecError([Problem("--cwd", str(Path(start or os.getcwd())),
                                 "a folder in (or under) an aicluster Pulumi project; make one with "
                                 "`aicluster new DIR` (docs/cli.md)")], subject="argument")
    names = project.stack_names()
    if stack is None:
        if len(names) == 1:
            return StackRef(project.root, names[0])
        allowed = (f"a stack named: the project in {project.root} has several: {', '.join(names)}" if names else
                   f"a stack file: the project in {project.root} has none (Pulumi.<stack>.yaml in {project.stack_dir})")
        raise SpecError([Problem("--stack", None, allowed)], subject="argument")
    if stack not in names:
        raise SpecError.one("--stack", stack, f"a stack of the project in {project.root} "
                                              f"(a Pulumi.<stack>.yaml in {project.stack_dir}): "
                                              f"{', '.join(names) or 'it has none'}", names, subject="argument")
    return StackRef(project.root, stack)


def stack_ref(args: Any) -> StackRef:
    """args (from a parser given `add_stack_arguments`) -> StackRef; see `resolve_stack`."""
    return resolve_stack(getattr(args, "stack", None), getattr(args, "cwd", None))


def stack_file(ref: StackRef) -> Path:
    """The stack's configuration file: Pulumi.<stack>.yaml beside Pulumi.yaml or in its stackConfigDir."""
    from aicluster.commands.stacks import find_project

    project = find_project(ref.project_dir)
    folder = project.stack_dir if project is not None and project.root == ref.project_dir else ref.project_dir
    return folder / f"Pulumi.{ref.stack}.yaml"


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
