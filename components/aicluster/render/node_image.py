"""What a baked node image holds (docs/images.md): its pins, the contents key that names them, and
the files and command an image builder bakes it with (aws/image.py, gcp/image.py through
render/image_bake.py).

- `pins(cloud)`: every pin the image holds, from the catalog only: Slurm (its version and source
  archive: URLs, SHA-256, size), the distribution packages beside it (munge), enroot and pyxis with their digests, node_exporter and the
  Prometheus agent with theirs, the DCGM exporter image, the log and metrics agents. Deterministic.
- `contents_key(cloud)`: the first 16 hex digits of the SHA-256 of pins(cloud) as canonical JSON.
  The on-node package is not part of it: nodes fetch the cluster's current package at boot anyway,
  so a change of aicluster's own code never asks for a new image.
- `bake_files(cloud)`: builder path -> bytes: the package (aicluster-node-<sha12>.pyz) with the
  entry points of aicluster-node-install and aicluster-install-slurm, the node's installers the bake runs (aicluster-containers,
  aicluster-pyxis-build, aicluster-monitoring: rendered from the catalog alone), and the pins file.
- `BAKE_COMMAND`: what the builder runs as root once those files are in place.

A node whose node.env names AICLUSTER_IMAGE_CONTENTS checks the image's manifest against it at
boot (`aicluster-node-install --check`) and installs nothing.
"""
from __future__ import annotations

import functools
import hashlib
import json
import posixpath

from aicluster.catalog import load_catalog
from aicluster.catalog.node_local import containers
from aicluster.catalog.observability import slurm_node_agents
from aicluster.catalog.slurm_release import slurm_release
from aicluster.render.node_local_files import containers_program, pyxis_build_program
from aicluster.render.node_programs import INSTALL_DIR, node_files
from aicluster.render.slurm_monitoring import monitoring_program

MANIFEST = "/etc/aicluster/image.json"          # aicluster.node.image.MANIFEST (a test holds them equal)
PINS_FILE = "/etc/aicluster/image-pins.json"     # aicluster.node.image.PINS
BIN = f"{INSTALL_DIR}/bin"
PROGRAM = "aicluster-node-install"
# The bake's programs of aicluster.node: the bake itself and the Slurm installer it runs.
BAKE_PROGRAMS = (PROGRAM, "aicluster-install-slurm")
# The cloud is the pins file's (bake_files writes it per cloud): one command for both clouds.
BAKE_COMMAND = (f"{BIN}/{PROGRAM}", "--bake", "--pins", PINS_FILE)


def bake_command(cloud: str) -> tuple[str, ...]:
    """BAKE_COMMAND naming the cloud too (the program refuses pins of another cloud)."""
    return (*BAKE_COMMAND, "--cloud", cloud)
# The roles a baked image serves: the GPU pools' nodes and the login nodes (the head installs at boot).
ROLES = ("compute", "login")
# Installed from the distribution beside Slurm on those roles: munge (the bootstraps install it with
# slurmd), boto3 (the AWS programs' SDK) and libnvidia-container (pyxis's containers get the GPUs
# through it).
WITH_SLURM = ("munge", "python3-boto3", "libnvidia-container-tools")
WITH_SLURM_GCP = ("munge", "libnvidia-container-tools")


@functools.lru_cache(maxsize=2)
def _pins(cloud: str) -> str:
    r = slurm_release()
    c = containers()
    agents = slurm_node_agents()
    pins = {
        "cloud": cloud,
        # Built from SchedMD's source archive by aicluster-install-slurm (every daemon, the client
        # commands, sackd and the headers); munge and boto3 from the distribution beside it.
        "slurm": r.pins(),
        "with": list(WITH_SLURM if cloud == "aws" else WITH_SLURM_GCP),
        "distribution": r.distribution,
        "enroot": {"version": c.enroot.version, "packages": list(c.enroot.packages),
                   "sha256": {arch: dict(sorted(d.items())) for arch, d in sorted(c.enroot.sha256.items())}},
        "pyxis": {"version": c.pyxis.version, "url": c.pyxis.url, "sha256": c.pyxis.sha256},
        "node_exporter": {"version": agents.node_exporter.version, "url": agents.node_exporter.url,
                          "sha256": agents.node_exporter.sha256},
        "dcgm_exporter": agents.dcgm_image,
    }
    if cloud == "aws":
        pins["prometheus_agent"] = {"version": agents.prometheus.version, "url": agents.prometheus.url,
                                    "sha256": agents.prometheus.sha256}
        pins["cloudwatch_agent"] = _pinned(agents.cloudwatch_agent)
    else:
        pins["ops_agent"] = _pinned(agents.ops_agent)
        # The GPU NIC stacks' pieces (gcp.yaml nic_stacks): what aicluster-gcp-fabric installs on a
        # node of each stack. Part of the key, so a new plugin image or package names a new image.
        pins["nic_stacks"] = {name: {"lib_dir": st.lib_dir, "nccl_plugin_image": st.nccl_plugin_image,
                                     "rxdm_image": st.rxdm_image, "apt_repository": st.apt_repository,
                                     "apt_packages": list(st.apt_packages)}
                              for name, st in sorted(load_catalog().nic_stacks.items())}
    return json.dumps(pins, sort_keys=True, separators=(",", ":"))


def _pinned(entry: dict) -> dict:
    """A catalog entry's pins, without its record keeping (source, the date it was checked)."""
    return {k: str(v) for k, v in sorted(entry.items()) if k not in ("source", "checked")}


def pins(cloud: str) -> dict:
    """Every pin a baked image of `cloud` holds (a fresh copy: callers may change it)."""
    return json.loads(_pins(cloud))


def contents_key(cloud: str) -> str:
    return hashlib.sha256(_pins(cloud).encode()).hexdigest()[:16]


def booted_contents(design, pool: str) -> str:
    """The contents key `pool`'s nodes check their image against (node.env
    AICLUSTER_IMAGE_CONTENTS), or "" when the pool installs at boot (no baked image, or a pool that
    does not boot it: an image of its own, TPU, Trainium)."""
    image = design.slurm.node_image if design.slurm else None
    return contents_key(design.cloud) if image is not None and pool in image.pools else ""


def bake_files(cloud: str) -> dict[str, bytes]:
    """Builder path -> content of everything the bake needs beside the parent image."""
    files = {path: content if isinstance(content, bytes) else content.encode()
             for path, content, _mode in node_files(BAKE_PROGRAMS, BIN)}
    for name, text in (("aicluster-containers", containers_program()),
                       ("aicluster-pyxis-build", pyxis_build_program()),
                       ("aicluster-monitoring", monitoring_program())):
        files[posixpath.join(BIN, name)] = text.encode()
    files[PINS_FILE] = (json.dumps({"contents": contents_key(cloud), **pins(cloud)}, indent=1, sort_keys=True)
                        + "\n").encode()
    return files
