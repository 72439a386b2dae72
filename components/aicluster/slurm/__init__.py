"""slurm: the Pulumi pieces of a Slurm cluster that both clouds' components share (the controller's
secrets and published files); the texts come from aicluster.render.

May import: render, design, spec, catalog, the base modules and Pulumi. Never aws or gcp: they
import this.
"""
__all__: list[str] = []   # a folder of modules: import each by its own name
