"""`aicluster new DIR`: a Pulumi project of the user's own, outside this repository, that every
aicluster command run inside it finds (commands/project.py, commands/stacks.py). In process:
`aicluster.cli.main`, with the working directory in the new project."""
from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from aicluster import cli
from aicluster.commands.project import installed_version
from tests.support import AWS_MIN, ROOT, SCHEMAS


def _plan_json(capsys, monkeypatch, folder, *args: str) -> dict:
    monkeypatch.chdir(folder)
    capsys.readouterr()
    code = cli.main(["plan", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_the_default_project_has_every_file_and_plans_inside_it(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "my-cluster"
    assert cli.main(["new", str(folder)]) == 0
    names = sorted(p.name for p in folder.iterdir())
    assert names == [".gitignore", "Pulumi.aws-p5-slurm.yaml", "Pulumi.yaml", "README.md", "__main__.py",
                     "requirements.txt"]
    project = yaml.safe_load((folder / "Pulumi.yaml").read_text())
    jsonschema.validate(project, json.loads((SCHEMAS / "pulumi-project.schema.json").read_text()))
    assert project["name"] == "my-cluster" and project["main"] == "__main__.py"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    assert "from aicluster.cluster import program" in (folder / "__main__.py").read_text()
    compile((folder / "__main__.py").read_text(), "__main__.py", "exec")
    assert f"aicluster=={installed_version()}" in (folder / "requirements.txt").read_text().splitlines()
    assert ".venv/" in (folder / ".gitignore").read_text().splitlines()
    config = yaml.safe_load((folder / "Pulumi.aws-p5-slurm.yaml").read_text())["config"]
    example = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml").read_text())["config"]
    assert config == example                  # the spec and the provider's region, as the example has them
    readme = (folder / "README.md").read_text()
    for step in ("aicluster plan", "aicluster check", "aicluster preflight", "aicluster diff", "pulumi login --local",
                 "file://DIR", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "aicluster up",
                 "aicluster status", "aicluster destroy"):
        assert step in readme, step
    doc = _plan_json(capsys, monkeypatch, folder)          # no args: the project's one stack
    assert doc["stack"] == "aws-p5-slurm"
    assert cli.main(["stacks"]) == 0
    assert capsys.readouterr().out.split() == ["aws-p5-slurm"]


def test_an_example_gcp_stack_under_a_name_of_its_own(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "tpu"
    assert cli.main(["new", str(folder), "--stack", "gcp-tpu-v5p-gke", "--name", "prod"]) == 0
    config = yaml.safe_load((folder / "Pulumi.prod.yaml").read_text())["config"]
    assert config["gcp:region"] == config["aicluster:cluster"]["region"]
    assert "gcp:project" in config
    readme = (folder / "README.md").read_text()
    assert "pulumi config set gcp:project" in readme        # the example's placeholder project
    (folder / "sub").mkdir()
    doc = _plan_json(capsys, monkeypatch, folder / "sub")    # found from below, too
    assert doc["stack"] == "prod"
    assert any(r["type"] == "gcp:container/cluster:Cluster" for r in doc["plan"]["resources"])
    assert doc["plan"]["outputs"]["access"]["project"] == yaml.safe_load((folder / "Pulumi.prod.yaml").read_text())["config"]["gcp:project"]


def test_from_a_bare_spec_the_stack_is_named_after_the_cluster(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump({**AWS_MIN, "name": "small", "region": "us-west-2", "zone": "us-west-2a"}))
    folder = tmp_path / "proj"
    assert cli.main(["new", str(folder), "--from", str(spec)]) == 0
    config = yaml.safe_load((folder / "Pulumi.small.yaml").read_text())["config"]
    assert config["aws:region"] == "us-west-2"                 # the provider follows the spec
    assert config["aicluster:cluster"]["name"] == "small"
    assert _plan_json(capsys, monkeypatch, folder)["stack"] == "small"


def test_from_a_stack_file_keeps_its_name_and_config(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "proj"
    assert cli.main(["new", str(folder), "--from", str(ROOT / "stacks" / "Pulumi.aws-p4d-small.yaml")]) == 0
    assert (folder / "Pulumi.aws-p4d-small.yaml").is_file()
    assert _plan_json(capsys, monkeypatch, folder)["stack"] == "aws-p4d-small"


def test_a_non_empty_dir_is_refused_and_left_alone(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["new", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "DIR" in err and "empty" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert cli.main(["new", str(tmp_path / "notes.txt")]) == 2        # a file is no folder


def test_an_empty_existing_dir_is_used(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    assert cli.main(["new", str(folder), "--stack", "aws-p4d-small"]) == 0
    assert (folder / "Pulumi.aws-p4d-small.yaml").is_file()


def test_a_bad_spec_is_refused_before_anything_is_written(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({**AWS_MIN, "pools": [{**AWS_MIN["pools"][0], "max_nodes": 0}]}))
    assert cli.main(["new", str(tmp_path / "proj"), "--from", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "pools[0].max_nodes" in err and "Traceback" not in err
    assert not (tmp_path / "proj").exists()


@pytest.mark.parametrize("args, says", [
    (["--stack", "aws-p5-slurmm"], "did you mean aws-p5-slurm?"),
    (["--name", "has space"], "--name"),
    (["--from", "missing.yaml"], "missing.yaml"),
])
def test_bad_arguments_exit_2_with_the_reason(tmp_path, capsys, args, says):
    assert cli.main(["new", str(tmp_path / "proj"), *args]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "proj").exists()


def test_from_and_stack_are_exclusive(tmp_path):
    with pytest.raises(SystemExit) as exc:
        cli.main(["new", str(tmp_path / "p"), "--from", "x.yaml", "--stack", "aws-p5-slurm"])
    assert exc.value.code == 2


def test_a_project_with_two_stacks_asks_which(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "proj"
    assert cli.main(["new", str(folder), "--stack", "aws-p4d-small"]) == 0
    (folder / "Pulumi.second.yaml").write_text((folder / "Pulumi.aws-p4d-small.yaml").read_text())
    monkeypatch.chdir(folder)
    capsys.readouterr()
    assert cli.main(["plan"]) == 2
    assert "aws-p4d-small, second" in capsys.readouterr().err
    assert _plan_json(capsys, monkeypatch, folder, "--stack", "second")["stack"] == "second"
    # An example stack the project lacks is still there by name.
    assert _plan_json(capsys, monkeypatch, folder, "--stack", "gcp-a3mega-slurm")["stack"] == "gcp-a3mega-slurm"


def test_secrets_of_another_stack_are_not_copied(tmp_path, capsys):
    source = tmp_path / "Pulumi.old.yaml"
    config = {"aws:region": "us-east-1", "aicluster:cluster": {**AWS_MIN, "name": "old"},
              "token": {"secure": "v1:abcdef"}}
    source.write_text(yaml.safe_dump({"encryptionsalt": "v1:salt", "config": config}))
    assert cli.main(["new", str(tmp_path / "proj"), "--from", str(source)]) == 2
    assert "config.token" in capsys.readouterr().err
    assert not (tmp_path / "proj").exists()
