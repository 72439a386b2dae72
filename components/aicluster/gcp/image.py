"""aicluster:gcp:NodeImage - the Slurm nodes' baked Compute Engine image, built in `pulumi up`.

GCP has no Image Builder: a builder VM bakes its own boot disk and powers off, and a
`gcp.compute.Image` is made from that disk (Cluster Toolkit does the same with Packer). In the
cluster stack for the same reason as on AWS (aws/image.py): the image holds exactly the pins the
cluster's files are rendered for, and a new pin rolls through the cluster in the same run.

- The builder: a VM in the cluster's subnetwork (no external IP: it reaches the archives through
  Cloud NAT), on the GPU pools' own image family (Canonical's accelerator image: the NVIDIA driver
  and RDMA user space stay), Shielded VM, no service account at all (the bake calls no Google API).
  Its metadata carries the bake files (render/image_bake.py: one tar, base64, in values of at most
  CHUNK characters) and a startup script that unpacks them, runs the bake, records the outcome in the guest attribute
  aicluster/bake (`done <key>` or `failed: <reason>`) and powers the VM off.
- The wait: the image's source disk is known only once the guest attribute says done and the VM is
  TERMINATED (wait_for_bake, an apply that polls the two read-only data sources; it never runs in a
  preview, where the builder's name is unknown). A failed bake fails `pulumi up` with its reason.
- The image: `<cluster>-node-<key>` in the family `<cluster>-node`, labelled with the contents key;
  the pools' instance templates and the login nodes boot its self link.

Named after the contents key (render/node_image.py), so new pins make a new builder and a new image
beside the old ones; the old image stays for nodes still on it until the roll replaces them. The
stopped builder keeps its disk (the image's source) until the next bake replaces it: docs/images.md.
"""
from __future__ import annotations

import base64
import time
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.parts import NodeImageDesign
from aicluster.gcp.common import labels, node_tag, short_name
from aicluster.render import image_bake, node_image
from aicluster.spec.cluster import NODE_IMAGE_VOLUME_GIB

ROLE = "image"
# The builder: a catalog controller type (16 vCPUs compile Slurm in minutes); no GPU needed.
BUILDER_TYPE = "n2-standard-16"
GUEST_ATTRIBUTE = "aicluster/bake"
# The bake files' tar (render/image_bake.py), base64, in metadata values of at most CHUNK characters
# (a value holds at most 256 KB; all of an instance's metadata at most 512 KB: tests/contracts).
TAR_KEY = "aicluster-bake-tar-{n}"
CHUNK = 200_000
# How long `pulumi up` waits for the bake (Slurm from source, the container stack, the exporters).
BAKE_TIMEOUT_S = 3 * 3600
POLL_S = 30
BAKE_LOG = "/var/log/aicluster-bake.log"    # on the builder's disk: what a failed bake said

STARTUP_SCRIPT = """#!/bin/bash
# aicluster: bake this VM's boot disk into the node image (contents {key}), then power off.
set -uo pipefail
md=http://metadata.google.internal/computeMetadata/v1
get() {{ curl -sf -H 'Metadata-Flavor: Google' "$md/instance/attributes/$1"; }}
report() {{ curl -sf -X PUT --data "$1" -H 'Metadata-Flavor: Google' "$md/instance/guest-attributes/{attribute}"; }}
# A restart after the bake (a host event) must not bake again over a finished disk.
if [[ -e {manifest} ]] && grep -q '"contents": *"{key}"' {manifest}; then report "done {key}"; poweroff; exit 0; fi
fail() {{ report "failed: $*"; poweroff; exit 1; }}
: >"{tar}.b64" || fail "cannot write {tar}.b64"
for n in $(seq 0 {last}); do get "{tar_key}$n" >>"{tar}.b64" || fail "cannot read metadata {tar_key}$n"; done
base64 -d "{tar}.b64" >"{tar}" || fail "cannot decode the bake files"
log={log}
if ( set -e; {bake} ) >"$log" 2>&1; then
  grep -q '"contents": *"{key}"' {manifest} || fail "the manifest does not name contents {key}"
  sync
  report "done {key}"
else
  fail "$(tail -n 1 "$log" | cut -c1-200)"
fi
poweroff
"""


def tar_chunks(cloud: str = "gcp") -> list[str]:
    """The bake files' tar, base64, cut into metadata values."""
    text = base64.b64encode(image_bake.bake_tar(cloud)).decode()
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def startup_script(key: str, chunks: int, root: str = "/", tar: str = image_bake.TAR_PATH) -> str:
    """The builder's startup script: join the tar from its `chunks` metadata values, bake, report.
    It names only the contents key: a new on-node archive changes metadata, never the script.
    `root` and `tar` move the files for the tests (a scratch tree)."""
    return STARTUP_SCRIPT.format(key=key, attribute=GUEST_ATTRIBUTE,
                                 manifest=root.rstrip("/") + node_image.MANIFEST, last=chunks - 1,
                                 tar_key=TAR_KEY.format(n=""), tar=tar,
                                 bake="; ".join(image_bake.bake_lines("gcp", tar, root)),
                                 log=root.rstrip("/") + BAKE_LOG)


def bake_outcome(values: dict[str, str] | None, key: str) -> str | None:
    """None while the bake runs; "" when it is done with this key; the reason when it failed."""
    value = (values or {}).get(GUEST_ATTRIBUTE, "")
    if value == f"done {key}":
        return ""
    if value.startswith("failed"):
        return value
    return None


def wait_for_bake(project: str, zone: str, name: str, disk: str, key: str) -> str:
    """`disk` once the builder `name` reported its bake done and is TERMINATED; raises when it
    failed or took longer than BAKE_TIMEOUT_S. Only during `pulumi up` (applies do not run on
    unknown values in a preview; a preview of a stack whose builder exists returns at once: it only
    shows what `pulumi up` would do)."""
    if pulumi.runtime.is_dry_run():
        return disk
    deadline = time.monotonic() + BAKE_TIMEOUT_S
    while True:
        attributes = gcp.compute.get_instance_guest_attributes(name=name, zone=zone, project=project,
                                                               query_path="aicluster/")
        values = {f"{item.namespace}/{item.key}": item.value
                  for item in attributes.query_values or []}
        outcome = bake_outcome(values, key)
        if outcome:
            raise RuntimeError(f"baking the node image on {name} failed: {outcome} (its log: {BAKE_LOG} "
                               "on the builder's disk)")
        if outcome == "" and gcp.compute.get_instance(name=name, zone=zone, project=project).current_status == "TERMINATED":
            return disk
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node image bake on {name} did not finish in {BAKE_TIMEOUT_S // 60} minutes")
        time.sleep(POLL_S)


@dataclass(frozen=True)
class NodeImageArgs:
    """The baked image of a Slurm cluster's GPU pools and login nodes.

    context: the cluster's name, project, region, zone and labels. image: what to bake from
    (`ClusterDesign.slurm.node_image`). subnetwork: where the builder runs (private, with Cloud NAT).
    """
    context: ClusterContext
    image: NodeImageDesign
    subnetwork: pulumi.Input[str]


class NodeImage(pulumi.ComponentResource):
    image_id: pulumi.Output[str]     # the image's self link
    contents: str

    def __init__(self, name: str, args: NodeImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:NodeImage", name, None, opts)
        cluster = args.context
        key = self.contents = node_image.contents_key("gcp")
        image_labels = {**labels(cluster, ROLE), "aicluster-image-contents": key}
        chunks = tar_chunks()
        builder_name = short_name(f"{cluster.name}-node-builder", 46) + f"-{key}"

        builder = gcp.compute.Instance(
            f"{name}-builder", name=builder_name, zone=cluster.zone, machine_type=BUILDER_TYPE,
            description=f"aicluster {cluster.name}: bakes the node image (contents {key}), then powers off",
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=args.image.base_image, size=NODE_IMAGE_VOLUME_GIB, type="pd-balanced",
                    labels=image_labels)),
            network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                subnetwork=args.subnetwork, nic_type="GVNIC")],          # no access_configs: no external IP
            shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True),
            metadata={
                "startup-script": startup_script(key, len(chunks)),
                "enable-guest-attributes": "TRUE",
                "block-project-ssh-keys": "TRUE",
                **{TAR_KEY.format(n=n): chunk for n, chunk in enumerate(chunks)},
            },
            tags=[node_tag(cluster)],
            labels=image_labels,
            # Powered off by its own script when done: its status is the bake's, not a drift to undo.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["desiredStatus", "currentStatus"]))

        disk = pulumi.Output.all(builder.project, builder.zone, builder.name, builder.boot_disk.source).apply(
            lambda a: wait_for_bake(a[0], a[1], a[2], a[3], key))
        image = gcp.compute.Image(
            f"{name}-image", name=short_name(f"{cluster.name}-node", 46) + f"-{key}",
            family=short_name(f"{cluster.name}-node", 63),
            description=f"aicluster {cluster.name}: Slurm GPU node (contents {key})",
            source_disk=disk, storage_locations=[cluster.region], labels=image_labels,
            opts=pulumi.ResourceOptions(parent=self))

        self.image_id = image.self_link
        self.register_outputs({"image_id": image.self_link, "contents": key})
