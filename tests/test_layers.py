"""One-way layers (issue 12, "One-way layers"), checked on the source with `ast`.

Every import of every module under components/aicluster counts, including the ones inside
functions (that is how the old cycles were hidden). Imports under `if TYPE_CHECKING:` are exempt:
they only name types for annotations and never run (except in a package that exports lazily via
aicluster.lazy, where the TYPE_CHECKING block mirrors imports that do run on first use).

Checked:
(a) no import cycle among aicluster modules;
(b) every import goes to the same or a lower layer (LAYERS, lowest first);
(c) the policy pack imports only aicluster.errors, aicluster.catalog, aicluster.balance,
    aicluster.stateful and aicluster.perf (plus pulumi_policy, yaml, the standard library and its own modules), and those
    need nothing above the catalog layer;
(d) nothing imports aicluster.cli.
Known exceptions live in KNOWN_VIOLATIONS: the test fails on a new one and on a listed one that is
gone (a ratchet: the list only shrinks).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "components"
PACKAGE = "aicluster"

# Lowest first. A module may import modules of its own layer (no cycle: check (a)) or of a lower one.
# An entry names a module or a package (the package's every module). Layer names are for messages.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # No aicluster import at all, or only each other: input bounds, errors, file locations, Mount.
    ("base", ("aicluster.limits", "aicluster.errors", "aicluster.resources", "aicluster.input_files",
              "aicluster.mounts", "aicluster.lazy")),
    # Every sourced fact and its loader (instances, TPUs, storage, pinned Kubernetes versions), and
    # the TPU slice arithmetic that only reads the catalog; no spec, no Pulumi.
    ("catalog", ("aicluster.catalog", "aicluster.tpu")),
    # Raw YAML -> ClusterSpec or SpecError; checks read the catalog, never a design.
    ("spec", ("aicluster.workload_spec", "aicluster.login_spec", "aicluster.pod_identity_spec", "aicluster.slurm_settings", "aicluster.spec")),
    # The training model: FLOPs, memory, step time, layout search; reads the catalog, never a design.
    ("perf", ("aicluster.perf",)),
    # ClusterSpec -> ClusterDesign, pure; the balance and stateful models the policy pack shares.
    ("design", ("aicluster.balance", "aicluster.stateful", "aicluster.telemetry_backend", "aicluster.critical_path", "aicluster.workload_inputs",
                "aicluster.zone_subnets", "aicluster.accounting_design", "aicluster.kubernetes_design", "aicluster.pod_identity_design", "aicluster.gke_design", "aicluster.login_design", "aicluster.design",
                "aicluster.observability_design")),
    # ClusterDesign -> file texts (templates, slurm.conf).
    ("render", ("aicluster.render", "aicluster.slurm_config", "aicluster.slurm_monitoring", "aicluster.slurm_files", "aicluster.login_files",
                "aicluster.node_local_files", "aicluster.alert_rules", "aicluster.dashboards")),
    # Pulumi components: per cloud, and the in-cluster Kubernetes objects both clusters share.
    ("components", ("aicluster.aws", "aicluster.gcp", "aicluster.k8s_capacity", "aicluster.k8s_resources", "aicluster.k8s_data", "aicluster.k8s_objects", "aicluster.k8s_health", "aicluster.k8s_metrics",
                    "aicluster.k8s_jobs", "aicluster.slurm_controller")),
    # The composition root: stack config -> spec -> design -> components.
    ("program", ("aicluster.cluster",)),
    # Runs any Pulumi program offline: engine, capture, fake clouds, the policy bridge.
    ("offline", ("aicluster.offline",)),
    # What the commands do: read stacks, plan, check, report, write outputs, docs.
    ("commands", ("aicluster.estimate_command", "aicluster.workload_file", "aicluster.stacks", "aicluster.out_dir", "aicluster.catalog_view", "aicluster.k8s_manifests",
                  "aicluster.planner", "aicluster.check", "aicluster.plan_report", "aicluster.spec_docs")),
    # The public API (package exports) and the `aicluster` command; nothing imports cli.
    ("api", ("aicluster",)),
    ("cli", ("aicluster.cli",)),
]

POLICY_ALLOWED = ("aicluster.errors", "aicluster.catalog", "aicluster.balance", "aicluster.stateful", "aicluster.perf")
# pulumi_policy: the pack API; yaml: sec_005 parses cloud-init (PyYAML is the catalog loader's own dependency).
POLICY_THIRD_PARTY = ("pulumi_policy", "yaml")

# (importer, imported) pairs that break a rule today and are not fixed yet. Empty: keep it so.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((SOURCE / PACKAGE).rglob("*.py")):
        name, is_package = _module_name(path)
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


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported aicluster module: first line}, runtime imports only."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = name if is_package else name.rpartition(".")[0]
        found = _imports(tree, package)
        lazy = any(_resolve(n, modules) == "aicluster.lazy" for n, _, _ in found)
        edges: dict[str, int] = {}
        for imported, line, typing_only in found:
            target = _resolve(imported, modules)
            if target is None or target == name or (typing_only and not lazy):
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


def _violations() -> dict[tuple[str, str], str]:
    graph = _graph()
    out = {}
    for module, edges in graph.items():
        mine = _layer_of(module)
        for target, line in edges.items():
            theirs = _layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                out[(module, target)] = (f"{module} (layer {LAYERS[mine][0]}) imports {target} "
                                         f"(layer {LAYERS[theirs][0]}) at line {line}")
    return out


def test_every_module_has_a_layer():
    missing = sorted(m for m in _modules() if _layer_of(m) is None)
    assert not missing, f"put these modules in a layer of tests/test_layers.py LAYERS: {missing}"


def test_no_import_cycle():
    graph = _graph()
    known = {edge for edge in KNOWN_VIOLATIONS}
    pruned = {m: {t: l for t, l in e.items() if (m, t) not in known} for m, e in graph.items()}
    cycle = _cycle(pruned)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {pruned[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_imports_go_only_down_the_layers():
    found = _violations()
    new = {k: v for k, v in found.items() if k not in KNOWN_VIOLATIONS}
    assert not new, "upward imports:\n" + "\n".join(sorted(new.values()))


def test_known_violations_only_shrink():
    found, graph = _violations(), _graph()
    still = {k for k in KNOWN_VIOLATIONS if k in found or k[1] in graph.get(k[0], {})}
    gone = KNOWN_VIOLATIONS - still
    assert not gone, f"fixed: remove these from KNOWN_VIOLATIONS: {sorted(gone)}"


def _policy_files() -> list[Path]:
    return sorted((ROOT / "policies").rglob("*.py"))


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
    assert not bad, "the policy pack imports only aicluster.errors/catalog/balance/stateful/perf:\n" + "\n".join(bad)


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


def test_the_checker_sees_function_level_imports():
    """The checker itself: an import inside a function counts, one under TYPE_CHECKING does not."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n"
                     "def f():\n    from .b import Y\n    import aicluster.c\n")
    found = {(n, t) for n, _, t in _imports(tree, "aicluster")}
    assert ("aicluster.a.X", True) in found
    assert ("aicluster.b.Y", False) in found and ("aicluster.c", False) in found
    assert _cycle({"x": {"y": 1}, "y": {"x": 2}}) in (["x", "y", "x"], ["y", "x", "y"])
