"""One-way layers (issues 12 and 25), checked on the source with `ast`.

The package is cut into folders, one per layer (docs/layout.md draws them); a module's layer is its
folder's. Every import of every module under components/aicluster counts: the ones inside
functions (that is how the old cycles were hidden) and the ones under `if TYPE_CHECKING:` too (a
type-only import still ties two modules together: shared types live a layer down).

Checked, with no exception list:
(a) no import cycle among aicluster modules;
(b) every import goes to the same or a lower layer (LAYERS, lowest first), so two folders never
    import each other;
(c) the policy pack imports only aicluster.errors, aicluster.catalog, aicluster.design.balance,
    aicluster.design.stateful and aicluster.perf (plus pulumi_policy, yaml, the standard library and
    its own modules), and those need nothing above the catalog layer;
(d) nothing imports aicluster.cli;
(e) at most 12 modules sit directly in components/aicluster; everything else is in a folder;
(f) the node programs (aicluster.node) import nothing of aicluster but each other, the standard
    library and the cloud SDKs: a node has none of the rest.
The checker is itself tested: a planted upward import and a planted two-way import fail it.
"""
from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "components"
PACKAGE = "aicluster"
MAX_TOP_LEVEL_MODULES = 12

# Lowest first. A module may import modules of its own layer (no cycle: check (a)) or of a lower one.
# An entry names a module or a folder (its every module). Layer names are for messages.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # No aicluster import at all, or only each other: input bounds, errors, file locations, Mount.
    ("base", ("aicluster.limits", "aicluster.errors", "aicluster.resources", "aicluster.mounts",
              "aicluster.lazy")),
    # What runs on the nodes (aicluster.node): the standard library, the cloud SDKs and itself only
    # (test_node_programs_import_only_the_node_package); the render layer ships it.
    ("node", ("aicluster.node",)),
    # Every sourced fact and its loader; no spec, no Pulumi.
    ("catalog", ("aicluster.catalog",)),
    # Raw YAML -> ClusterSpec or SpecError; checks read the catalog, never a design.
    ("spec", ("aicluster.spec",)),
    # The training model: FLOPs, memory, step time, layout search; reads the catalog, never a design.
    ("perf", ("aicluster.perf",)),
    # ClusterSpec -> ClusterDesign, pure; the balance and stateful models the policy pack shares.
    ("design", ("aicluster.design",)),
    # ClusterDesign -> file texts (templates, slurm.conf, rules, dashboards).
    ("render", ("aicluster.render",)),
    # Pulumi pieces both clouds share: inside Kubernetes, and the Slurm controller's.
    ("shared components", ("aicluster.kubernetes", "aicluster.slurm")),
    # Pulumi components per cloud.
    ("cloud components", ("aicluster.aws", "aicluster.gcp")),
    # The composition root: stack config -> spec -> design -> components.
    ("program", ("aicluster.cluster",)),
    # Runs any Pulumi program offline: engine, capture, fake clouds, the policy bridge.
    ("offline", ("aicluster.offline",)),
    # What the commands do: read stacks, plan, check, estimate, report, write outputs, docs.
    ("commands", ("aicluster.commands",)),
    # The public API (package exports) and the `aicluster` command; nothing imports cli.
    ("api", ("aicluster",)),
    ("cli", ("aicluster.cli",)),
]

POLICY_ALLOWED = ("aicluster.errors", "aicluster.catalog", "aicluster.design.balance",
                  "aicluster.design.stateful", "aicluster.perf")
# pulumi_policy: the pack API; yaml: sec_005 parses cloud-init (PyYAML is the catalog loader's own dependency).
POLICY_THIRD_PARTY = ("pulumi_policy", "yaml")


def _module_name(path: Path, source: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(source).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _modules(source: Path = SOURCE) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((source / PACKAGE).rglob("*.py")):
        name, is_package = _module_name(path, source)
        out[name] = (path, is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, package: str) -> list[tuple[str, int, bool]]:
    """(absolute dotted name, line, under TYPE_CHECKING) of every import in the tree; `from X import
    a` gives X.a (a module or a name in X)."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            found.extend((a.name, node.lineno, typing_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.extend((f"{module}.{a.name}", node.lineno, typing_only) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return found


def _resolve(name: str, modules) -> str | None:
    """The aicluster module an imported dotted name lives in (None: not aicluster)."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def _graph(source: Path = SOURCE) -> dict[str, dict[str, int]]:
    """module -> {imported aicluster module: first line}, type-only imports included."""
    modules = _modules(source)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = name if is_package else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for imported, line, _ in _imports(tree, package):
            target = _resolve(imported, modules)
            if target is None or target == name:
                continue
            edges.setdefault(target, line)
        graph[name] = edges
    return graph


def _layer_of(module: str) -> int | None:
    best, best_len = None, -1
    for i, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > best_len:
                best, best_len = i, len(entry)
    return best


def _cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}      # 1: on the stack, 2: done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def _cycle_message(graph: dict[str, dict[str, int]]) -> str | None:
    cycle = _cycle(graph)
    if cycle is None:
        return None
    return "import cycle: " + " -> ".join(
        f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def _upward(graph: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for module, edges in graph.items():
        mine = _layer_of(module)
        for target, line in edges.items():
            theirs = _layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{module} (layer {LAYERS[mine][0]}) imports {target} "
                           f"(layer {LAYERS[theirs][0]}) at line {line}")
    return sorted(out)


def test_every_module_has_a_layer():
    missing = sorted(m for m in _modules() if _layer_of(m) is None)
    assert not missing, f"put these modules in a layer of tests/test_layers.py LAYERS: {missing}"


def test_at_most_twelve_modules_at_the_top():
    top = sorted(p.name for p in (SOURCE / PACKAGE).glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(top)} modules sit directly in components/aicluster (at most {MAX_TOP_LEVEL_MODULES}): "
        f"{top}; move a concern into its folder")


def test_every_folder_is_a_documented_package():
    """Each folder's __init__ says what it owns and what it may import (issue 25, item 1)."""
    bad = []
    for folder in sorted(p for p in (SOURCE / PACKAGE).iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) if init.exists() else None
        if not doc or "May import" not in doc:
            bad.append(folder.name)
    assert not bad, f"folders whose __init__ docstring does not say what they own and may import: {bad}"


def test_no_import_cycle():
    message = _cycle_message(_graph())
    assert message is None, message


def test_imports_go_only_down_the_layers():
    found = _upward(_graph())
    assert not found, "upward imports:\n" + "\n".join(found)


def test_the_checker_fails_on_a_planted_upward_and_a_planted_two_way_import(tmp_path):
    """The same checks over a copy of the package with two imports planted: a spec module that
    imports the commands (upward) and two design modules that import each other for types only."""
    shutil.copytree(SOURCE / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    assert _upward(_graph(tmp_path)) == [] and _cycle_message(_graph(tmp_path)) is None
    spec = tmp_path / PACKAGE / "spec" / "login.py"
    spec.write_text(spec.read_text() + "\n\ndef _late():\n    from aicluster.commands import planner\n")
    upward = _upward(_graph(tmp_path))
    assert any(m.startswith("aicluster.spec.login (layer spec) imports aicluster.commands.planner") for m in upward), upward
    for mine, theirs in (("accounting", "login"), ("login", "accounting")):
        path = tmp_path / PACKAGE / "design" / f"{mine}.py"
        path.write_text(path.read_text() + f"\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        f"    from aicluster.design.{theirs} import X\n")
    message = _cycle_message(_graph(tmp_path))
    assert message is not None and "aicluster.design.accounting" in message and "aicluster.design.login" in message, message


def _policy_files() -> list[Path]:
    return sorted((ROOT / "policies").rglob("*.py"))


NODE_PACKAGE = "aicluster.node"
NODE_THIRD_PARTY = ("boto3", "botocore")


def test_node_programs_import_only_the_node_package():
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for name, (path, is_package) in _modules().items():
        if name != NODE_PACKAGE and not name.startswith(NODE_PACKAGE + "."):
            continue
        package = name if is_package else name.rpartition(".")[0]
        for imported, line, _ in _imports(ast.parse(path.read_text(encoding="utf-8")), package):
            top = imported.split(".")[0]
            if top in stdlib or top == "__future__" or top in NODE_THIRD_PARTY:
                continue
            if imported == NODE_PACKAGE or imported.startswith(NODE_PACKAGE + "."):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "aicluster.node imports only itself, the standard library and boto3:\n" + "\n".join(bad)


def test_policy_pack_depends_only_on_catalog_balance_stateful():
    local = {p.stem for p in _policy_files()} | {"rules"}
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path in _policy_files():
        for name, line, _ in _imports(ast.parse(path.read_text(encoding="utf-8")), "rules"):
            top = name.split(".")[0]
            if name.startswith("rules.") or top in local or top in stdlib or top == "__future__":
                continue
            if top in POLICY_THIRD_PARTY:
                continue
            if top == PACKAGE and any(name == a or name.startswith(a + ".") for a in POLICY_ALLOWED):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "the policy pack imports only " + ", ".join(POLICY_ALLOWED) + ":\n" + "\n".join(bad)


def test_what_the_policy_pack_uses_stays_low():
    """catalog, balance and stateful (and what they import) need nothing above the catalog layer but
    themselves, so the pack never loads the spec, the design or Pulumi components."""
    graph, modules = _graph(), _modules()
    allowed_top = max(i for i, (name, _) in enumerate(LAYERS) if name == "catalog")
    todo = [m for m in modules if any(m == a or m.startswith(a + ".") for a in POLICY_ALLOWED)]
    seen, bad = set(todo), []
    while todo:
        module = todo.pop()
        for target in graph[module]:
            if target in seen:
                continue
            seen.add(target)
            todo.append(target)
            if _layer_of(target) > allowed_top and target not in POLICY_ALLOWED:
                bad.append(f"{module} -> {target}")
    assert not bad, f"the policy pack's dependencies pull in: {bad}"


def test_nothing_imports_cli():
    graph = _graph()
    importers = sorted(m for m, edges in graph.items() if "aicluster.cli" in edges)
    others = [p for p in _policy_files()] + sorted((ROOT / "examples").rglob("*.py")) + [ROOT / "__main__.py"]
    for path in others:
        if path.is_file():
            for name, line, _ in _imports(ast.parse(path.read_text(encoding="utf-8")), ""):
                if name == "aicluster.cli" or name.startswith("aicluster.cli."):
                    importers.append(f"{path.relative_to(ROOT)}:{line}")
    assert not importers, f"nothing imports aicluster.cli: {importers}"


def test_the_checker_sees_function_level_and_type_only_imports():
    """The checker itself: an import inside a function counts, and so does one under TYPE_CHECKING."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n"
                     "def f():\n    from .b import Y\n    import aicluster.c\n")
    found = {(n, t) for n, _, t in _imports(tree, "aicluster")}
    assert ("aicluster.a.X", True) in found
    assert ("aicluster.b.Y", False) in found and ("aicluster.c", False) in found
    assert _cycle({"x": {"y": 1}, "y": {"x": 2}}) in (["x", "y", "x"], ["y", "x", "y"])
