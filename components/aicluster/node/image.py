#!/usr/bin/env python3
"""aicluster-node-install: bake a Slurm node image, and check at boot that a node runs the one its
cluster expects (docs/images.md).

    aicluster-node-install --bake [--cloud aws|gcp] [--pins FILE]
                          on an image builder, as root: install everything the pins file
                          (/etc/aicluster/image-pins.json) names, write the manifest
                          (/etc/aicluster/image.json); --cloud must be the pins' cloud
    aicluster-node-install --check KEY
                          at boot: the manifest names contents KEY; report it
    aicluster-node-install --slurm ARGS...
                          aicluster-install-slurm ARGS... (node/install_slurm.py): what a compute
                          or login node that boots a stock image runs to build its Slurm

The bake installs with the node's own installers, so a baked node and a node that installs at boot
get the same bits the same way, each download checked against its pinned SHA-256:
  1. munge (and boto3 on AWS) from the distribution, then Slurm: aicluster-install-slurm builds the
     pinned source archive (every daemon and command, the units, the headers) as every role does;
  2. pyxis, built here against that Slurm (aicluster-pyxis-build --install);
  3. enroot (+caps) and libnvidia-container (aicluster-containers --install-only);
  4. the exporters and the metrics and log agents (aicluster-monitoring --install-only);
then it cleans apt's caches and writes the manifest: the contents key, the cloud, when, every pin,
and what it found installed (slurmd -V, enroot's version, the NVIDIA driver, EFA, the kernel).

The check reads the manifest: a missing one, or one naming other contents, is an error whose
message is the node's set-up failure reason. On success it writes the node_exporter textfile
metric aicluster_node_image_info{contents,slurm,driver,built} 1 and prints one line for the log.

Standard library only. AICLUSTER_ROOT prefixes every path it reads or writes and AICLUSTER_BIN
moves aicluster's programs (the tests run it in a scratch tree with fake commands).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

from aicluster.node import install_slurm as slurm_installer

MANIFEST = "/etc/aicluster/image.json"
PINS = "/etc/aicluster/image-pins.json"
TEXTFILE = "aicluster_node_image.prom"
EFA_PACKAGES = "/opt/amazon/efa_installed_packages"


class ImageError(Exception):
    """The node's image is not the one its cluster expects, or a bake step failed (the message)."""


def root() -> str:
    return os.environ.get("AICLUSTER_ROOT", "")


def bin_dir() -> str:
    return os.environ.get("AICLUSTER_BIN", "/opt/aicluster/bin")


def rooted(path: str) -> str:
    return root() + path


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".aicluster-image-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


# --- the check, at boot -----------------------------------------------------------------------------


def read_manifest() -> dict:
    try:
        with open(rooted(MANIFEST), encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        raise ImageError(f"no {MANIFEST}: this image was not baked by aicluster") from None
    except (OSError, ValueError) as err:
        raise ImageError(f"cannot read {MANIFEST}: {err}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("contents"), str):
        raise ImageError(f"{MANIFEST} names no contents")
    return manifest


def label(value) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return str(value or "").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def check(expected: str, textfile_dir: str) -> str:
    """The one line that says which image this node runs; ImageError when it is not `expected`."""
    manifest = read_manifest()
    if manifest["contents"] != expected:
        raise ImageError(f"baked for contents {manifest['contents']}, this cluster's pins are {expected}")
    found = manifest.get("found") or {}
    slurm, driver, built = found.get("slurmd", ""), found.get("nvidia_driver", ""), manifest.get("built_at", "")
    write_atomic(rooted(os.path.join(textfile_dir, TEXTFILE)),
                 "# HELP aicluster_node_image_info The baked image this node booted (docs/images.md).\n"
                 "# TYPE aicluster_node_image_info gauge\n"
                 f'aicluster_node_image_info{{contents="{label(expected)}",slurm="{label(slurm)}",'
                 f'driver="{label(driver)}",built="{label(built)}"}} 1\n')
    return f"baked image: contents {expected}, built {built or 'at an unknown time'}, {slurm or 'no slurmd found'}, " \
           f"NVIDIA driver {driver or 'none'}"


# --- the bake, on an image builder ------------------------------------------------------------------


def run(*command: str, env: dict | None = None) -> str:
    """Run a command; its output, or ImageError with its last line."""
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})})
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise ImageError(f"{' '.join(command[:3])}: exit {done.returncode}: {last[:200]}")
    return done.stdout


def output(*command: str) -> str:
    """What a command prints (first line), or "" when it is missing or fails: for the manifest."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""


def install_slurm(pins: dict) -> None:
    """munge and the other distribution packages beside Slurm, then the cluster's Slurm from its
    pinned source archive (aicluster-install-slurm: each URL's bytes checked against the SHA-256).
    Its units are installed, never enabled: only a compute node's bootstrap starts slurmd (with the
    controller and its name), a login node's sackd."""
    run("apt-get", "update", "-q")
    run("apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "--no-install-recommends", *pins["with"],
        env={"DEBIAN_FRONTEND": "noninteractive"})
    slurm = pins["slurm"]
    run(f"{bin_dir()}/aicluster-install-slurm", "--version", slurm["version"], "--sha256", slurm["sha256"],
        "--size", str(slurm["size"]), *slurm["urls"])


def found(cloud: str) -> dict:
    efa = ""
    try:
        with open(rooted(EFA_PACKAGES), encoding="utf-8") as fh:
            efa = next((line.strip() for line in fh if "EFA installer version" in line), "")
    except OSError:
        pass
    return {
        "slurmd": output("slurmd", "-V"),
        "enroot": output("enroot", "version"),
        "nvidia_driver": output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"),
        "efa_installer": efa,
        "kernel": platform.release(),
        "cloud": cloud,
    }


def bake(pins_path: str, cloud: str | None = None) -> dict:
    """Install everything `pins_path` names, then write and return the manifest."""
    try:
        with open(rooted(pins_path), encoding="utf-8") as fh:
            pins = json.load(fh)
    except (OSError, ValueError) as err:
        raise ImageError(f"cannot read the pins {pins_path}: {err}") from None
    if cloud is not None and pins.get("cloud") != cloud:
        raise ImageError(f"the pins {pins_path} are for {pins.get('cloud')!r}, not {cloud!r}")
    cloud = pins["cloud"]
    steps = [
        ("slurm", lambda: install_slurm(pins)),
        ("pyxis", lambda: run(f"{bin_dir()}/aicluster-pyxis-build", "--install")),
        ("containers", lambda: run(f"{bin_dir()}/aicluster-containers", "--install-only")),
        ("monitoring", lambda: run(f"{bin_dir()}/aicluster-monitoring", "--install-only", "--cloud", cloud,
                                   "--role", "compute")),
        ("clean", lambda: run("apt-get", "clean")),
    ]
    for name, step in steps:
        print(f"aicluster-node-install: bake: {name}", file=sys.stderr, flush=True)
        try:
            step()
        except ImageError as err:
            raise ImageError(f"bake: {name}: {err}") from None
    manifest = {"contents": pins["contents"], "cloud": cloud,
                "built_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "pins": pins, "found": found(cloud)}
    write_atomic(rooted(MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--slurm"]:
        # aicluster-install-slurm itself: a compute or login node's user data lists one program
        # fewer to fetch (EC2 takes at most 16 KB of it).
        return slurm_installer.main(argv[1:])
    parser = argparse.ArgumentParser(prog="aicluster-node-install", description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--bake", action="store_true", help="bake this machine into a node image from the pins file")
    action.add_argument("--check", metavar="KEY", help="check that this node's image has contents KEY")
    parser.add_argument("--pins", default=PINS, help=f"the bake's pins (default {PINS})")
    parser.add_argument("--cloud", choices=("aws", "gcp"), help="the cloud the image is for (must be the pins')")
    parser.add_argument("--textfile-dir", default="/var/lib/node_exporter/textfile",
                        help="node_exporter's textfile directory (the --check metric)")
    args = parser.parse_args(argv)
    try:
        if args.bake:
            manifest = bake(args.pins, args.cloud)
            print(f"aicluster-node-install: baked contents {manifest['contents']}: {json.dumps(manifest['found'])}")
        else:
            print(check(args.check, args.textfile_dir))
    except ImageError as err:
        print(str(err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
