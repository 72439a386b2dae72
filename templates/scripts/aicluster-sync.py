#!/usr/bin/env python3
"""Keep the head node's Slurm configuration in step with the cluster (slurm-gcp's slurmsync
pattern). aicluster publishes every rendered file to S3 (AWS) or Cloud Storage (GCP) with a
manifest; this script, run at boot and by a systemd timer, pulls what changed, installs it,
restarts slurmctld and runs `scontrol reconfigure`.

So adding a pool, resizing one or changing the idle time never touches the head node's own
inputs: its user data only knows where the manifest lives.

    aicluster-sync [--bootstrap]     # --bootstrap: first run at boot, slurmctld not started yet

Settings: /etc/aicluster/sync.json {"bucket", "prefix", "region"} and, on GCP, "storage": "gcs"
(read through aicluster_gcp.py beside this file). For tests: AICLUSTER_ROOT
prefixes every local path; AICLUSTER_SCONTROL / AICLUSTER_SYSTEMCTL replace those commands.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("AICLUSTER_ROOT", "")
SCONTROL = os.environ.get("AICLUSTER_SCONTROL", "scontrol")
SYSTEMCTL = os.environ.get("AICLUSTER_SYSTEMCTL", "systemctl")


def local(path: str) -> str:
    return ROOT + path


def log(message: str) -> None:
    print(f"aicluster-sync: {message}", file=sys.stderr, flush=True)


def write_if_changed(path: str, data: bytes, mode: int) -> bool:
    target = local(path)
    try:
        with open(target, "rb") as fh:
            if fh.read() == data and (os.stat(target).st_mode & 0o7777) == mode:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".aicluster-sync-")
    os.fchmod(fd, mode)
    os.write(fd, data)
    os.close(fd)
    os.replace(tmp, target)
    return True


def ensure_link(path: str, target: str) -> bool:
    link = local(path)
    if os.path.islink(link) and os.readlink(link) == target:
        return False
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    return True


def sync(s3, bucket: str, prefix: str) -> list[dict]:
    """Install every file of the manifest that differs; return the entries that changed."""
    try:
        manifest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "manifest.json")["Body"].read())
    except Exception as exc:  # noqa: BLE001 - S3 NoSuchKey, a Cloud Storage 404, ...: logged, retried
        # The head node is created while the filesystems still are, and `pulumi up` publishes the
        # configuration once they exist: until then there is nothing to install.
        log(f"no manifest at {bucket}/{prefix}manifest.json yet ({type(exc).__name__}: {exc}); "
            "the timer tries again")
        return []
    changed = []
    for entry in manifest["files"]:
        data = s3.get_object(Bucket=bucket, Key=prefix + entry["key"])["Body"].read()
        if write_if_changed(entry["path"], data, int(entry.get("mode", "0644"), 8)):
            log(f"updated {entry['path']}")
            changed.append(entry)
    for link in manifest.get("links", []):
        if ensure_link(link["path"], link["target"]):
            log(f"linked {link['path']} -> {link['target']}")
    return changed


class GcsObjects:
    """The one S3 call sync() makes, get_object(Bucket, Key)["Body"].read(), over Cloud Storage."""

    def get_object(self, Bucket: str, Key: str) -> dict:  # noqa: N803 - the boto3 names sync() uses
        import io

        sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
        from aicluster_gcp import storage_read

        return {"Body": io.BytesIO(storage_read(Bucket, Key))}


def object_store(settings: dict):
    if settings.get("storage") == "gcs":
        return GcsObjects()
    import boto3

    return boto3.client("s3", region_name=settings["region"])


def slurmctld_active() -> bool:
    return subprocess.run([SYSTEMCTL, "is-active", "--quiet", "slurmctld"], check=False).returncode == 0


def apply_slurm_config() -> None:
    """Restart slurmctld, then push the files to configless slurmd's. A plain reconfigure is not
    enough: Slurm 22.05 exits on `scontrol reconfigure` when the node list changed, and
    accounting settings only take effect on restart. Running jobs survive a restart (state is
    saved in StateSaveLocation)."""
    subprocess.run([SYSTEMCTL, "restart", "slurmctld"], check=True)
    log("restarted slurmctld")
    for attempt in range(15):
        if subprocess.run([SCONTROL, "reconfigure"], check=False).returncode == 0:
            log("scontrol reconfigure")
            return
        time.sleep(2)
    raise RuntimeError("scontrol reconfigure kept failing after the restart")


def power_up_static_nodes() -> None:
    """The always-on nodes (min_nodes) start powered down like every CLOUD node: ask Slurm to
    resume those that are down, so they run without waiting for a job (SuspendExcNodes keeps
    them up afterwards)."""
    try:
        with open(local("/etc/aicluster/cluster.json"), encoding="utf-8") as fh:
            static = json.load(fh).get("static_nodes", [])
    except FileNotFoundError:
        return
    for hostlist in static:
        shown = subprocess.run([SCONTROL, "-o", "show", "node", hostlist], check=False,
                               capture_output=True, text=True).stdout
        down = []
        for line in shown.splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            state = fields.get("State", "")
            if "POWERED_DOWN" in state and "POWERING_UP" not in state:
                down.append(fields.get("NodeName", ""))
        if down:
            subprocess.run([SCONTROL, "update", f"nodename={','.join(down)}", "state=power_up"], check=False)
            log(f"powering up static nodes {','.join(down)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aicluster-sync")
    parser.add_argument("--bootstrap", action="store_true")
    args = parser.parse_args(argv)
    with open(local("/etc/aicluster/sync.json"), encoding="utf-8") as fh:
        settings = json.load(fh)
    changed = sync(object_store(settings), settings["bucket"], settings["prefix"])
    # Set-up steps a file asks for (e.g. accounting) run before slurmctld rereads its config.
    for entry in changed:
        if entry.get("run"):
            log(f"running {' '.join(entry['run'])}")
            subprocess.run([local(entry["run"][0]), *entry["run"][1:]], check=True)
    if not args.bootstrap and any(entry.get("reconfigure") for entry in changed):
        # Also starts a slurmctld that had no configuration at boot (published after the head
        # node exists, once the filesystems do).
        apply_slurm_config()
    running = not args.bootstrap and slurmctld_active()
    if running:
        power_up_static_nodes()
    if not changed:
        log("up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
