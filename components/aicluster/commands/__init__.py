"""commands: what the `aicluster` command does, one module per verb or output: plan (planner,
plan_report, out_dir, k8s_manifests), check, estimate (estimate, workload_file), catalog
(catalog_view), schema docs (spec_docs), and finding stack files (stacks).

May import everything below it: offline, the program (aicluster.cluster), the components, render,
design, spec, perf, catalog. Only aicluster.cli imports it for the command line; tests and bench
use it directly.
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
