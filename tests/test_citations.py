"""Every citation in the package, the templates, the policy pack and the tests can be followed by a
reader of the repository: it names a public source (a document and section, a paper, a URL, an
issue) or a file of this repository, never a file that lived beside the checkout on the machine it
was written on (notes of reference facts, a design document, a home or work folder).

Checked in Python comments and docstrings (code strings may name paths on purpose: a mount table,
a GKE host folder, a test's own patterns) and in the whole text of every other file (catalog
`source:` values are shown to users by `aicluster catalog`)."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.support import ROOT

SCANNED = ("components", "templates", "policies", "tests")
SUFFIXES = {".py", ".yaml", ".yml", ".j2", ".sh", ".md", ".txt", ".toml", ".cfg", ".ini", ".conf"}
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis"}
SKIPPED_DIRS = (ROOT / "tests" / "data" / "schemas",)   # third-party files, vendored verbatim
HERE = Path(__file__).resolve()

# A folder beside the checkout (shared/reference/..., with or without ../ before it).
SIBLING = re.compile(r"(?<![\w.-])(?:\.\./)*shared/")
# A path of the author's machine. /home/kubernetes/... is a GKE node's folder, not a person's home.
MACHINE_PATH = re.compile(r"(?<![\w.-])/(?:work|tmp|Users|root)/|(?<![\w.-])/home/(?!kubernetes/)[\w.-]+")
# A source key of a private notes file: [SPOD], [EFA-ACC], [G-NET] (two capitals in a row; not a
# Markdown link, not a character class such as [A-Z]).
SOURCE_KEY = re.compile(r"\[(?=[A-Z0-9-]*[A-Z]{2})[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*\](?!\()")
CODE_SPAN = re.compile(r"`[^`]*`")
# A bare Markdown file name (no folder before it): it must be a file of this repository.
BARE_MD = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b")
# Documents of other projects cited by their bare name, each beside the project that publishes it.
EXTERNAL_MD = {"instance-types.md": "Karpenter"}


def _files() -> list[Path]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES and path.resolve() != HERE
                    and not SKIPPED_PARTS.intersection(path.parts) and not path.match("*.egg-info/*")
                    and not any(d in path.parents for d in SKIPPED_DIRS)):
                found.append(path)
    return found


def _python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    prose = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                prose += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return prose


def _prose(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return _python_prose(text)
    return list(enumerate(text.splitlines(), 1))


def _repo_markdown() -> set[str]:
    return {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts and "build" not in p.parts}


def offenders(files: list[Path]) -> list[str]:
    markdown = _repo_markdown()
    found = []
    for path in files:
        for line_no, line in _prose(path):
            where = f"{path.relative_to(ROOT)}:{line_no}"
            for pattern, why in ((SIBLING, "a folder beside the checkout"), (MACHINE_PATH, "a machine's path")):
                if m := pattern.search(line):
                    found.append(f"{where}: {why}: {m.group(0)}")
            if m := SOURCE_KEY.search(CODE_SPAN.sub("", line)):   # `aicluster catalog [TYPE]` is usage
                found.append(f"{where}: a source key with no source: {m.group(0)}")
            for name in BARE_MD.findall(line):
                if name not in markdown and not (name in EXTERNAL_MD and EXTERNAL_MD[name] in line):
                    found.append(f"{where}: {name} is not in the repository")
    return found


def test_the_scan_covers_the_package_templates_policies_and_tests():
    files = {p.relative_to(ROOT).parts[0] for p in _files()}
    assert files == set(SCANNED)
    assert any(p.name == "balance.py" for p in _files())


def test_no_citation_points_outside_the_repository():
    found = offenders(_files())
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text", [
    '"""Sources are cited as in /work/' + 'shared/reference/{hardware,storage}.md."""\n',
    "X = 1  # 15 GBps / 256 GPUs [SPOD]\n",
    "X = 1  # host network UNVERIFIED (hardware.md)\n",
    "X = 1  # see ../" + "shared/DESIGN.md\n",
    "def f():\n    '''Written in /home/alice/src.'''\n",
    "X = 1  # scratch in /tmp/build\n",
    "X = 1  # a GPU NIC is shared evenly [G-NET]\n",
])
def test_the_check_catches_each_kind_of_outside_citation(tmp_path, monkeypatch, text):
    path = tmp_path / "sample.py"
    path.write_text(text)
    monkeypatch.setattr(Path, "relative_to", lambda self, other: self)
    assert offenders([path])


@pytest.mark.parametrize("text", [
    'NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"  # a GKE node folder\n',
    "X = 1  # NVIDIA DGX SuperPOD Reference Architecture RA-11333-001 V11\n",
    "X = 1  # docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html; aws-ofi-nccl doc/efa-env-var.md\n",
    "X = 1  # a pattern such as [A-Z] or [a-z0-9]; see README.md\n",
    'FORBIDDEN = {"/tmp", "/work/x"}\n',
    "X = 1  # usage: `aicluster catalog [TYPE]`\n",
])
def test_the_check_accepts_public_sources_and_code(tmp_path, monkeypatch, text):
    path = tmp_path / "sample.py"
    path.write_text(text)
    monkeypatch.setattr(Path, "relative_to", lambda self, other: self)
    assert not offenders([path])
