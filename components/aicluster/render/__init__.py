"""render: a design -> the texts that ship: user data, slurm.conf and its siblings, exporter and
agent configurations, alert rules, dashboards. Pure: no Pulumi.

Owns: the one jinja2 environment over templates/ (templates.py) and every renderer that fills it.
Cloud outputs (addresses, ids) arrive as plain values from the components' `Output.apply`.
May import: design, spec, perf, catalog and the base modules.
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
