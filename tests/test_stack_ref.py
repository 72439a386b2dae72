"""Which project and stack a command means: `aicluster.commands.automation.stack_ref` and the
project finder in commands/stacks.py (a user's project anywhere, its stacks beside Pulumi.yaml or in
its stackConfigDir; this checkout otherwise)."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from aicluster.commands import stacks
from aicluster.commands.automation import StackRef, add_stack_arguments, resolve_stack, stack_file, stack_ref
from aicluster.errors import SpecError
from tests.support import ROOT

SPEC_STACK = "config:\n  aws:region: us-east-1\n  aicluster:cluster:\n    name: demo\n"


def _project(root: Path, name: str = "mycluster", stacks: tuple[str, ...] = ("prod",), config_dir: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n"
                                      + (f"stackConfigDir: {config_dir}\n" if config_dir else ""))
    folder = root / config_dir if config_dir else root
    folder.mkdir(exist_ok=True)
    for stack in stacks:
        (folder / f"Pulumi.{stack}.yaml").write_text(SPEC_STACK)
    return root


def test_a_users_project_is_found_from_below_with_its_only_stack(tmp_path):
    root = _project(tmp_path / "proj")
    (root / "sub" / "deeper").mkdir(parents=True)
    assert resolve_stack(None, root / "sub" / "deeper") == StackRef(root.resolve(), "prod")
    assert stack_file(StackRef(root.resolve(), "prod")) == root.resolve() / "Pulumi.prod.yaml"


def test_stack_config_dir_is_honoured(tmp_path):
    root = _project(tmp_path / "proj", stacks=("a", "b"), config_dir="envs")
    assert resolve_stack("b", root) == StackRef(root.resolve(), "b")
    assert stack_file(StackRef(root.resolve(), "b")) == root.resolve() / "envs" / "Pulumi.b.yaml"
    with pytest.raises(SpecError, match="several: a, b"):
        resolve_stack(None, root)
    with pytest.raises(SpecError, match="did you mean b"):
        resolve_stack("bb", root)


def test_a_pulumi_project_of_something_else_is_not_ours(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "Pulumi.yaml").write_text("name: website\nruntime: nodejs\n")
    (other / "Pulumi.dev.yaml").write_text("config:\n  aws:region: us-east-1\n")
    project = stacks.find_project(other)
    assert project is None or project.root != other.resolve()


def test_the_checkout_is_the_project_when_nothing_nearer(tmp_path):
    ref = resolve_stack("aws-p5-slurm", tmp_path)
    assert ref == StackRef(ROOT, "aws-p5-slurm")
    assert stack_file(ref) == ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml"


def test_args_through_the_shared_arguments(tmp_path):
    root = _project(tmp_path / "proj")
    parser = argparse.ArgumentParser()
    add_stack_arguments(parser)
    assert stack_ref(parser.parse_args(["-C", str(root)])) == StackRef(root.resolve(), "prod")
    with pytest.raises(SpecError, match="--cwd"):
        stack_ref(parser.parse_args(["-C", str(tmp_path / "missing")]))


def test_the_default_stack_is_the_example_outside_a_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert stacks.default_stack() == stacks.DEFAULT_STACK


def test_an_example_stack_is_reachable_from_a_users_project(tmp_path, monkeypatch):
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    assert stacks.stack_names() == ["prod"]
    assert stacks.read_stack("aws-p4d-small").path == stacks.examples_dir() / "Pulumi.aws-p4d-small.yaml"
    # No FILE or --stack: the project's one stack; the example's name asked for by name: the example.
    assert stacks.default_stack() == "prod"
    assert stacks.read_stack(stacks.DEFAULT_STACK).path == stacks.examples_dir() / f"Pulumi.{stacks.DEFAULT_STACK}.yaml"
    with pytest.raises(SpecError, match="did you mean prod"):
        stacks.read_stack("prodd")


def test_a_project_of_several_stacks_asks_which(tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path / "proj", stacks=("a", "b")))
    with pytest.raises(SpecError, match="one of the stacks of the project.*a, b"):
        stacks.default_stack()
