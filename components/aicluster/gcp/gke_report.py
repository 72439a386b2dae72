"""The Kubernetes part of `aicluster plan` on GKE: the control plane, every node pool with its
additional networks and placement, the in-cluster objects, the queues and the example jobs, with
every pinned version."""
from __future__ import annotations

from typing import Any

from aicluster.design.model import ClusterDesign
from aicluster.design.gke_parts import GkeNodePool
from aicluster.kubernetes.capacity import capacity_lines, capacity_warnings
from aicluster.kubernetes.data import data_summary
from aicluster.kubernetes.in_cluster import claim_name, in_cluster_lines, job_name, queue_summary, volume_name
from aicluster.design.kubernetes import versions
from aicluster.gcp.gke_addons import chart_values, installer_archs, installer_name


def _networks_text(pool: GkeNodePool) -> str:
    rdma = [n.name for n in pool.networks if n.device_mode == "RDMA"]
    netdev = [n.name for n in pool.networks if n.device_mode == "NetDevice"]
    parts = []
    if netdev:
        parts.append(f"{', '.join(netdev)} (NetDevice)")
    if rdma:
        parts.append(f"{len(rdma)} RDMA networks {rdma[0]}..{rdma[-1]} (deviceMode RDMA)")
    return f"{len(pool.networks)} additional node networks: " + " + ".join(parts) if parts else "no additional networks"


def api_access(design: ClusterDesign) -> str:
    """How the `pulumi up` that installs the add-ons, and kubectl, reach the GKE API."""
    gke = design.kubernetes.gke
    creds = f"gcloud container clusters get-credentials {gke.cluster_name} --region {gke.location}"
    ip = ("the IP endpoint is private" if gke.private_endpoint
          else f"the IP endpoint is public for {', '.join(gke.api_access_cidrs)} only")
    if gke.api_access == "endpoint":
        return (f"the DNS-based endpoint (gke-<id>.{gke.location}.gke.goog), authorized by IAM "
                f"(container.clusters.connect) with no IP allowlist: `pulumi up` reaches it from anywhere, kubectl "
                f"after {creds} --dns-endpoint; {ip}")
    if gke.api_access == "vpc":
        return (f"the private endpoint only (DNS endpoint closed to outside traffic): run `pulumi up` and kubectl "
                f"inside the VPC or over VPN / Interconnect ({creds} --internal-ip)")
    return ("the private endpoint only, and this `pulumi up` creates no in-cluster object (phase 1: cluster, node "
            "pools, filesystems). Phase 2, from inside the VPC: set kubernetes.api_access: vpc and run `pulumi up` "
            "again; it adds the networks, installers, Helm charts, volumes, queues and example jobs below")


def kubernetes_summary(design: ClusterDesign) -> dict[str, Any]:
    kd, v = design.kubernetes, versions()
    gke = kd.gke
    pools = []
    for pool in gke.node_pools:
        kpool = kd.pool(pool.pool)
        entry = {
            "pool": pool.pool, "node_pools": list(pool.names), "machine_type": pool.machine_type,
            "min": pool.min_nodes, "max": pool.max_nodes, "capacity": pool.capacity, "reservation": pool.reservation,
            "placement": "COMPACT" if pool.compact else None, "taints": [f"{t.key}={t.value}:{t.effect}" for t in kpool.taints],
            "labels": dict(kpool.labels), "boot_disk": pool.disk_type, "secure_boot": pool.secure_boot,
            "ephemeral_local_ssds": pool.local_ssds, "image_streaming": pool.image_streaming,
        }
        if pool.tpu:
            entry |= {"tpu": pool.tpu.name, "topology": pool.tpu.topology, "slices": pool.slices,
                      "hosts_per_slice": pool.tpu.hosts, "chips_per_host": pool.tpu.chips_per_host,
                      "chips": pool.tpu.chips * pool.slices}
        else:
            entry |= {"accelerator": pool.accelerator, "gpus": pool.gpus, "gpu_driver": gke.gpu_driver_version,
                      "nic_stack": pool.nic_stack,
                      "additional_networks": [{"name": n.name, "device_mode": n.device_mode, "interface": n.interface}
                                              for n in pool.networks]}
        pools.append(entry)
    return {
        "platform": "gke",
        "version": gke.version, "release_channel": gke.release_channel,
        "location": gke.location, "zone": gke.zone,
        "endpoint": {"private": True, "public_cidrs": list(gke.api_access_cidrs), "dns": gke.dns_endpoint,
                     "api_access": gke.api_access, "reached_by": api_access(design),
                     "in_cluster_objects": kd.in_cluster},
        "dataplane_v2": True, "multi_networking": True, "workload_identity": True,
        "pods_cidr": gke.pods_cidr, "services_cidr": gke.services_cidr, "max_pods_per_node": gke.max_pods_per_node,
        "system_nodes": {"machine_type": gke.system_machine_type, "count": gke.system_nodes},
        "node_pools": pools,
        "networks": [{"name": n.name, "device_mode": n.device_mode} for n in gke.networks],
        # Installer DaemonSet -> its image: one per NIC stack and CPU architecture (A4X: arm64).
        "nccl_installers": {installer_name(s, a): (v.nccl_installers[s].image_arm64 if a == "arm64"
                                                   else v.nccl_installers[s].image)
                            for s in gke.nic_stacks for a in installer_archs(design, s)},
        "charts": {name: v.charts[name].version for name in chart_values(design)},
        "volumes": [{"volume": volume_name(design, fs), "claim": f"{kd.namespace}/{claim_name(fs)}",
                     "capacity": f"{fs.capacity_gib}Gi", "mount": fs.mount,
                     "driver": "Managed Lustre CSI" if fs.kind == "managed-lustre" else "Filestore CSI"}
                    for fs in design.storage],
        **data_summary(design),
        "queues": {"local_queue": f"{kd.namespace}/{kd.local_queue}", "cluster_queue": kd.cluster_queue,
                   "quotas": {p.flavor: {r: p.quota[r] for r in g.resources}
                              for g in kd.resource_groups for p in g.pools}, **queue_summary(design)},
        "jobs": [f"k8s/examples/{job_name(p)}.yaml" for p in kd.pools],
        "capacity_warnings": capacity_warnings(design),
    }


def kubernetes_lines(design: ClusterDesign) -> list[str]:
    s = kubernetes_summary(design)
    gke = design.kubernetes.gke
    access = "private IP endpoint" + (f" + public for {', '.join(s['endpoint']['public_cidrs'])}"
                                      if s["endpoint"]["public_cidrs"] else "")
    access += " + DNS endpoint (IAM)" if s["endpoint"]["dns"] else " only"
    lines = [f"  control plane: regional ({s['location']}), release channel {s['release_channel']} from "
             f"{s['version']}, {access}, private nodes, Dataplane V2 + multi-networking, Workload Identity, "
             f"Managed Lustre, Filestore and Cloud Storage FUSE CSI drivers",
             f"  Kubernetes API: {s['endpoint']['reached_by']}",
             f"  pods {s['pods_cidr']} ({s['max_pods_per_node']} per node), services {s['services_cidr']}",
             f"  system nodes: {s['system_nodes']['count']} x {s['system_nodes']['machine_type']}"]
    for pool, entry in zip(gke.node_pools, s["node_pools"]):
        placement = "compact placement" if pool.compact else (
            "the reservation's placement" if pool.reservation else "no compact placement")
        capacity = pool.capacity + (f" {pool.reservation}" if pool.reservation else "")
        boot = f"{pool.disk_type} boot disk, " + (
            "Secure Boot" if pool.secure_boot
            else "no Secure Boot (GKE mounts Managed Lustre on Secure Boot nodes of GPU machine types only)")
        if pool.local_ssds:
            boot += f", {pool.local_ssds} local SSDs as RAID0 ephemeral storage"
        if pool.image_streaming:
            boot += ", image streaming"
        if pool.tpu:
            lines.append(f"  node pools {', '.join(pool.names)}: {pool.tpu.describe()} each "
                         f"({entry['slices']} slice(s), {entry['chips']} chips), {placement} with tpu_topology "
                         f"{pool.tpu.topology}, {capacity}, {boot}, taint {', '.join(entry['taints'])}")
        else:
            lines.append(f"  node pool {pool.names[0]}: {pool.min_nodes}..{pool.max_nodes} x {pool.machine_type} "
                         f"({pool.gpus} x {pool.accelerator}, GKE driver {entry['gpu_driver']}), {capacity}, "
                         f"{placement}, {boot}; {_networks_text(pool)}")
    if not s["endpoint"]["in_cluster_objects"]:
        lines.append("  in-cluster objects (phase 2, from inside the VPC with kubernetes.api_access: vpc):")
    if s["networks"]:
        lines.append("  GKENetworkParamSet + Network: " + ", ".join(f"{n['name']} ({n['device_mode']})"
                                                                    for n in s["networks"]))
    for installer, image in s["nccl_installers"].items():
        lines.append(f"  NCCL installer DaemonSet {installer}: {image}")
    lines += capacity_lines(design)
    lines += [f"  warning: {w}" for w in s["capacity_warnings"]]
    lines += in_cluster_lines(s)
    return lines
