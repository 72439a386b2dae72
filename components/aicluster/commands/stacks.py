"""Finding projects and reading stack files the way Pulumi does, offline.

A project is a folder with a Pulumi.yaml: this checkout (project `aicluster`, stacks in stacks/),
or one `aicluster new` made anywhere (any name; its stack files beside Pulumi.yaml or in its
stackConfigDir hold the spec under `aicluster:cluster`). Commands look in the nearest project at or
above the working directory; the example stacks ship in the wheel as aicluster/stacks."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aicluster.errors import Problem, SpecError, close_match
from aicluster.spec.input_files import load_yaml, read_text
from aicluster.resources import CHECKOUT_DIR, shipped_dir

SPEC_KEY = "aicluster:cluster"


@dataclass(frozen=True)
class StackConfig:
    """One stack's configuration file."""
    name: str
    path: Path
    config: dict[str, Any]     # every key of the stack's `config:`, e.g. aws:region

    @property
    def spec_data(self) -> Any:
        return self.config.get(SPEC_KEY)


DEFAULT_STACK = "aws-p5-slurm"   # the example `aicluster plan` plans outside a project of your own


@dataclass(frozen=True)
class Project:
    """A Pulumi project that deploys aicluster: this checkout, or one `aicluster new` made."""
    root: Path          # the folder holding Pulumi.yaml
    name: str           # Pulumi.yaml `name:`
    stack_dir: Path     # where its Pulumi.<stack>.yaml files lie: stackConfigDir, else beside Pulumi.yaml

    @property
    def is_checkout(self) -> bool:
        return self.root == CHECKOUT_DIR

    def stack_names(self) -> list[str]:
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in self.stack_dir.glob("Pulumi.*.yaml"))

    def stack_file(self, name: str) -> Path:
        return self.stack_dir / f"Pulumi.{name}.yaml"


def _project_at(folder: Path) -> Project | None:
    """The aicluster project whose Pulumi.yaml is in `folder`, or None: a Pulumi project named
    aicluster (this checkout), or any Pulumi project one of whose stack files holds an
    `aicluster:cluster` spec (a user's own, whatever its name)."""
    candidate = folder / "Pulumi.yaml"
    if not candidate.is_file():
        return None
    try:
        doc = yaml.safe_load(_head(candidate))
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        return None
    config_dir = doc.get("stackConfigDir")
    stack_dir = folder / config_dir if isinstance(config_dir, str) and config_dir else folder
    project = Project(folder, doc["name"], stack_dir)
    if project.name == "aicluster":
        return project
    for stack in stack_dir.glob("Pulumi.*.yaml"):
        if f"{SPEC_KEY}:" in _head(stack):
            return project
    return None


def find_project(start: Path | str | None = None) -> Project | None:
    """The nearest aicluster project at or above `start` (the working directory), else this
    checkout's own project when aicluster runs from a checkout, else None (an installed wheel)."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        found = _project_at(folder)
        if found is not None:
            return found
    return _project_at(CHECKOUT_DIR)


def project_root() -> Path:
    """The nearest folder at or above the working directory with an aicluster Pulumi.yaml, else
    the checkout this package lives in (its stacks/ are the examples)."""
    project = find_project()
    return project.root if project is not None else CHECKOUT_DIR


def _head(path: Path, size: int = 1 << 16) -> str:
    """The start of a file, or "" when it cannot be read: a Pulumi.yaml names its project near the top."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""


def examples_dir() -> Path:
    """The example stacks: stacks/ in the checkout, aicluster/stacks in an installed wheel."""
    return shipped_dir("stacks")


def example_names() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in examples_dir().glob("Pulumi.*.yaml"))


def stacks_dir() -> Path:
    """The stack files `--stack NAME` names: the project's, else the examples."""
    project = find_project()
    return project.stack_dir if project is not None else examples_dir()


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


def default_stack() -> str:
    """What `aicluster plan` plans with no FILE or --stack: in a user's project its one stack (several:
    a SpecError listing them), else the default example."""
    project = find_project()
    if project is None or project.is_checkout:
        return DEFAULT_STACK
    names = project.stack_names()
    if len(names) == 1:
        return names[0]
    raise SpecError([Problem("--stack", None, f"one of the stacks of the project in {project.root}: "
                                              f"{', '.join(names) or '(none: add a Pulumi.<stack>.yaml)'}")],
                    subject="argument")


def stack_target(file: str | None, stack: str | None) -> str:
    """What a command given FILE and/or --stack NAME reads (`plan`, `preflight`): one of them, or
    without either the default stack."""
    if file and stack:
        raise SpecError.one("--stack", stack, "either --stack NAME or FILE, not both", subject="argument")
    return file or stack or default_stack()


def _stack_path(target: str) -> Path:
    """The stack file of the name `target`: the project's, else an example."""
    project = find_project()
    if project is not None and project.stack_file(target).is_file():
        return project.stack_file(target)
    example = examples_dir() / f"Pulumi.{target}.yaml"
    if example.is_file():
        return example
    names = sorted({*(project.stack_names() if project is not None else ()), *example_names()})
    where = stacks_dir() if project is None or project.is_checkout else f"{project.stack_dir} or the examples"
    raise SpecError([Problem("--stack", target, f"a stack in {where}: {', '.join(names)}",
                             close_match(target, names))], subject="argument")


def read_stack(target: str) -> StackConfig:
    """`target` is a stack name (aws-p5-slurm) or a path to a stack file or a bare spec file."""
    path = Path(target)
    if not (path.suffix in (".yaml", ".yml") or os.sep in target):
        path = _stack_path(target)
    # Bounded and strict (input_files): a regular file of at most 1 MiB, no duplicate keys, no
    # nesting or aliases past the limits; anything else is a SpecError naming FILE or the YAML path.
    doc = load_yaml(read_text(path, arg="FILE", what="stack or spec YAML file", subject="cluster spec"),
                    str(path))
    name = path.name[len("Pulumi."):-len(path.suffix)] if path.name.startswith("Pulumi.") else path.stem
    if isinstance(doc, dict) and "config" in doc:
        config = doc.get("config") or {}
        if not isinstance(config, dict) or SPEC_KEY not in config:
            raise SpecError([Problem(f"{path}: config", None, f"a `{SPEC_KEY}:` key holding the cluster spec")])
        return StackConfig(name, path, dict(config))
    # A bare spec file: the whole document is the cluster spec.
    return StackConfig(name, path, {SPEC_KEY: doc})
