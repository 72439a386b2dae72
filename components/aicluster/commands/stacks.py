"""Finding and reading stack files (stacks/Pulumi.<stack>.yaml) the way Pulumi does, offline."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicluster.errors import Problem, SpecError, close_match
from aicluster.spec.input_files import load_yaml, read_text
from aicluster.resources import CHECKOUT_DIR

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


def project_root() -> Path:
    """The nearest folder at or above the working directory with an aicluster Pulumi.yaml, else
    the checkout this package lives in (its stacks/ are the examples)."""
    here = Path(os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "Pulumi.yaml"
        if candidate.is_file() and "name: aicluster" in _head(candidate):
            return folder
    return CHECKOUT_DIR


def _head(path: Path, size: int = 1 << 16) -> str:
    """The start of a file, or "" when it cannot be read: a Pulumi.yaml names its project near the top."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""


def stacks_dir() -> Path:
    return project_root() / "stacks"


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


def read_stack(target: str) -> StackConfig:
    """`target` is a stack name (aws-p5-slurm) or a path to a stack file or a bare spec file."""
    path = Path(target)
    if not (path.suffix in (".yaml", ".yml") or os.sep in target):
        path = stacks_dir() / f"Pulumi.{target}.yaml"
        if not path.is_file():
            names = stack_names()
            raise SpecError([Problem("--stack", target, f"a stack in {stacks_dir()}: {', '.join(names)}",
                                     close_match(target, names))], subject="argument")
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
