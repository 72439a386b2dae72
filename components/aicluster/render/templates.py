"""The one jinja2 environment over templates/: strict, so a missing value fails the render
(and the tests) instead of writing an empty string into a config a daemon will read.

Compiled templates are kept in a per-user bytecode cache ($XDG_CACHE_HOME/aicluster, else
~/.cache/aicluster), so a plan compiles only the templates that changed since the last one (jinja2
compiling a plan's templates is ~170 ms, loading them from the cache a few ms). jinja2 checks each
entry against the template's source checksum, its own version and Python's, and the directory's
name carries the environment's options: a stale entry is never used. A cache that cannot be made
or written is skipped, never an error.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Mapping

import jinja2

from aicluster.catalog.slurm_release import slurm_release
from aicluster.resources import shipped_dir

TEMPLATES = shipped_dir("templates")

# Everything but the loader: these decide what a template compiles to, so they name the cache.
OPTIONS: dict[str, Any] = {
    "undefined": jinja2.StrictUndefined,
    "keep_trailing_newline": True,
    "trim_blocks": True,
    "lstrip_blocks": True,
    "autoescape": False,  # configs and scripts, not HTML
}


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, where a file that cannot be read or written only means compiling."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:   # noqa: BLE001 - an unreadable or foreign entry: compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:     # read-only home, full disk: the next plan compiles again
            pass


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where compiled templates are kept for this jinja2 and these OPTIONS, or None (no home)."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):         # unset, or relative: the XDG spec says ignore it
        home = environ.get("HOME") or os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    fingerprint = hashlib.sha256(repr((jinja2.__version__, sorted(OPTIONS.items()))).encode()).hexdigest()[:16]
    return Path(base) / "aicluster" / f"jinja2-{fingerprint}"


def bytecode_cache(environ: Mapping[str, str] = os.environ) -> jinja2.BytecodeCache | None:
    directory = cache_dir(environ)
    if directory is None:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(directory, os.W_OK | os.X_OK):
        return None
    return _QuietBytecodeCache(str(directory))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), bytecode_cache=bytecode_cache(),
                             **OPTIONS)
    # The one pinned Slurm (catalog/slurm_release.yaml), in every template: each role's install
    # line takes it from here, so head, login and compute nodes cannot drift apart.
    env.globals["slurm_release"] = slurm_release()
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def static(name: str) -> str:
    """A file under templates/ installed as it is (scripts with `${#...}` are not jinja)."""
    return (TEMPLATES / name).read_text(encoding="utf-8")
