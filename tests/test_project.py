"""The project files themselves: Pulumi.yaml against Pulumi's schema, bounded dependency pins."""
from __future__ import annotations

import json
import re
import tomllib

import jsonschema
import yaml

from conftest import ROOT

SHARED = ROOT.parent / "shared" / "vendor-data"


def test_pulumi_yaml_validates_against_the_project_schema():
    schema_path = SHARED / "pulumi-project.schema.json"
    assert schema_path.is_file(), f"missing {schema_path} (shared/ must sit beside the checkout)"
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, json.loads(schema_path.read_text()))
    assert project["name"] == "aicluster"
    assert project["main"] == "__main__.py"
    assert project["stackConfigDir"] == "stacks"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}


def test_every_dependency_has_a_lower_and_an_upper_bound():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["test"]
    for pin in pins:
        assert re.search(r">=\s*[\d.]+", pin) and re.search(r"<\s*[\d.]+", pin), pin
    names = {re.split(r"[<>=\[]", pin)[0] for pin in project["dependencies"]}
    assert {"pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-policy", "pulumi-random", "jinja2", "pydantic",
            "pyyaml"} <= names
    assert any(p.startswith("pulumi-aws>=7") and "<8" in p for p in project["dependencies"])
    assert any(p.startswith("pulumi-gcp>=10") and "<11" in p for p in project["dependencies"])
    assert any(p.startswith("pulumi-kubernetes>=4.18") and "<5" in p for p in project["dependencies"])
    assert any(p.startswith("kubernetes-validate>=") for p in project["optional-dependencies"]["test"])
    assert project["scripts"]["aicluster"] == "components.cli:main"
