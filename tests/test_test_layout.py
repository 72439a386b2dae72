"""The tests' own layout (issue 12, item 6): tests mirror the package, every test folder is a
package, shared helpers live in one support package (tests/support) and no test imports another
test module.

- Every folder under tests/ that holds Python files is a package (has __init__.py), except the
  folders of inputs (DATA: vendored schemas, seeded Pulumi programs the policy tests plan).
- Outside tests/support, a module is a test module (test_*.py), a conftest.py or an __init__.py.
- No module under tests/ imports a test module or a conftest, or a module by a bare name that
  only works through sys.path (`import handwritten`): helpers are `from tests.support import ...`.
- No module under tests/ edits sys.path, and a conftest.py holds only fixtures and pytest hooks.
"""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SUPPORT = TESTS / "support"
DATA = (TESTS / "data", TESTS / "policies" / "seeded")   # inputs, not test code


def _in_data(path: Path) -> bool:
    return any(path == d or d in path.parents for d in DATA)


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts and not _in_data(p))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _local_names() -> set[str]:
    """Names a bare import could reach through a test folder on sys.path: every module and folder
    under tests/ (rootdir-relative imports start at `tests.`)."""
    names = {p.stem for p in _python_files()}
    names |= {p.name for p in TESTS.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    return names - {"__init__"}


def _is_test_module(dotted: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in dotted.split("."))


def _imports(tree: ast.AST, path: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in the module, relative ones resolved."""
    found = []
    package = path.relative_to(ROOT).with_suffix("").parts[:-1] if path.name != "__init__.py" else \
        path.parent.relative_to(ROOT).parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def test_every_test_folder_is_a_package():
    folders = {p.parent for p in _python_files()}
    for folder in list(folders):
        folders |= {parent for parent in folder.parents if TESTS in parent.parents or parent == TESTS}
    missing = sorted(_rel(f) for f in folders if not (f / "__init__.py").exists())
    assert missing == [], f"test folders without __init__.py: {missing}"


def test_helpers_live_in_tests_support():
    stray = [_rel(p) for p in _python_files()
             if SUPPORT not in p.parents and not p.name.startswith("test_")
             and p.name not in ("conftest.py", "__init__.py")]
    assert stray == [], f"shared helpers belong in tests/support, not beside the tests: {stray}"


def test_support_has_no_tests():
    assert sorted(_rel(p) for p in SUPPORT.rglob("test_*.py")) == []
    assert not (SUPPORT / "conftest.py").exists()


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_test_module_imports_another():
    local = _local_names()
    bad = []
    for path in _python_files():
        reported = set()
        for line, name in _imports(_tree(path), path):
            top = name.split(".")[0]
            if line in reported:
                continue
            if _is_test_module(name) or (top in local and top != "tests"):
                reported.add(line)
            if _is_test_module(name):
                bad.append(f"{_rel(path)}:{line}: imports the test module {name} (move what it shares to "
                           "tests/support)")
            elif top in local and top != "tests":
                bad.append(f"{_rel(path)}:{line}: `{name}` is a bare name reached through sys.path; "
                           "import it from tests.support")
    assert bad == [], "\n".join(bad)


def test_no_module_edits_sys_path():
    edits = [f"{_rel(path)}:{node.lineno}" for path in _python_files() for node in ast.walk(_tree(path))
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert edits == [], f"sys.path touched (import from tests.support instead): {edits}"


def test_conftest_holds_only_fixtures_and_hooks():
    other = []
    for path in (p for p in _python_files() if p.name == "conftest.py"):
        other += [f"{_rel(path)}:{line}" for line in _not_fixtures(_tree(path))]
    assert other == [], f"conftest.py shares more than fixtures and hooks (move it to tests/support): {other}"


def _not_fixtures(tree: ast.AST) -> list[str]:
    other = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
            if not (fixture or node.name.startswith("pytest_")):
                other.append(f"line {node.lineno}: def {node.name} (not a fixture or hook)")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ClassDef)):
            targets = [ast.unparse(t) for t in getattr(node, "targets", [getattr(node, "target", None)]) if t]
            if targets != ["pytest_plugins"]:
                other.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return other


def test_the_checks_catch_a_bad_layout():
    """The import check resolves relative imports and bare names as the layout checks need."""
    module = TESTS / "aws" / "test_example.py"
    tree = ast.parse("from conftest import X\nfrom .test_eks import Y\nimport handwritten\n"
                     "from tests.aws import test_eks\nfrom tests.support import AWS_MIN\n"
                     "from ..support.fuzz import EXAMPLES\n")
    names = [name for _, name in _imports(tree, module)]
    assert "conftest" in names and "tests.aws.test_eks" in names and "handwritten" in names
    assert "tests.support.fuzz" in names
    assert [n for n in names if _is_test_module(n)] == ["conftest", "conftest.X", "tests.aws.test_eks",
                                                        "tests.aws.test_eks.Y", "tests.aws.test_eks"]
    assert "handwritten" in _local_names()
    conftest = ast.parse("import pytest\nBASE = {}\n\n@pytest.fixture\ndef base():\n    return BASE\n\n"
                         "def helper():\n    pass\n\ndef pytest_collection_finish(session):\n    pass\n")
    assert [line.split(":")[0] for line in _not_fixtures(conftest)] == ["line 2", "line 8"]
