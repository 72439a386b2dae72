"""The docs stay true: the generated spec reference equals the schema's, every relative link in
README.md and docs/*.md resolves (file and heading), and README.md stays a guide (<= 30 KB)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from aicluster.spec.cluster import json_schema
from aicluster.commands.spec_docs import REGENERATE, markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def test_spec_reference_is_the_schema_command_output():
    run = subprocess.run([sys.executable, "-m", "aicluster.cli", "schema", "--format", "markdown"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    committed = (DOCS / "spec-reference.md").read_text()
    assert committed == run.stdout, f"docs/spec-reference.md is stale; regenerate it: {REGENERATE}"


def test_spec_reference_has_a_table_per_section_with_every_key():
    schema = json_schema()
    text = markdown(schema)
    for section in ("## Top level", "## `network`", "## `network.existing`", "## `pools[]`",
                    "## `pools[].tpu`", "## `pools[].capacity`", "## `storage[]`", "## `workload`",
                    "## `slurm`", "## `slurm.head_node`", "## `kubernetes`", "## `kubernetes.system_nodes`"):
        assert f"\n{section}\n" in text, section
    for definition in (schema, *schema["$defs"].values()):
        for key in definition.get("properties", {}):
            assert f"| `{key}` |" in text, key
    # Allowed values, defaults and required keys come from the schema, and `|` never breaks a table.
    assert "| `scheduler` | string | `slurm` | `slurm`, `kubernetes` |" in text
    assert "| `max_nodes` | integer | required | >= 1, <= 100000 |" in text
    for line in text.splitlines():
        if line.startswith("| `"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 6, line


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _links(page: Path) -> list[str]:
    links, fenced = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            links += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):   # https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link} (no {target})")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {target.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_readme_is_a_guide_and_points_to_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 30 * 1024, "README.md is over 30 KB: move reference material to docs/"
    for doc in DOCS.glob("*.md"):
        if doc.name != "README.md":
            assert f"(docs/{doc.name})" in readme, f"README.md does not point to docs/{doc.name}"
