"""The one jinja2 environment over templates/: strict, so a missing value fails the render
(and the tests) instead of writing an empty string into a config a daemon will read."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

from .catalog.slurm_release import slurm_release
from .resources import shipped_dir

TEMPLATES = shipped_dir("templates")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # configs and scripts, not HTML
    )
    # The one pinned Slurm (catalog/slurm_release.yaml), in every template: each role's install
    # line takes it from here, so head, login and compute nodes cannot drift apart.
    env.globals["slurm_release"] = slurm_release()
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def static(name: str) -> str:
    """A file under templates/ installed as it is (scripts with `${#...}` are not jinja)."""
    return (TEMPLATES / name).read_text(encoding="utf-8")
