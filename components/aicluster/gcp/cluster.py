"""The GCP cluster: network, node identity, filesystems, the Slurm controller, then one GpuPool per
pool, then the Slurm configuration that follows the pools (the same order and the same reasons as
components/aicluster/aws/cluster.py).

Filesystems and the controller consume nothing from pools, so scaling or adding pools never touches
storage or the head node.
"""
from __future__ import annotations

import pulumi

from aicluster.render.alert_rules import rule_groups
from aicluster.catalog import load_catalog
from aicluster.catalog.observability import scrape
from aicluster.design.slurm_blocks import slurm_topology
from aicluster.design.model import ClusterDesign
from aicluster.mounts import Mount
from aicluster.render.node_local_files import local_nvme_devices, node_local_programs
from aicluster.render.node_image import booted_contents
from aicluster.render.node_programs import NODE_PROGRAMS, node_files, program_text
from aicluster.render.slurm_files import BIN, BootFile
from aicluster.design.observability import monitoring_design
from aicluster.render.templates import render
from aicluster.render.slurm_config import SLURMCTLD_PORT, node_domain
from aicluster.design.telemetry_backend import log_streams
from aicluster.gcp.gpu_pool import GpuPool, GpuPoolArgs
from aicluster.gcp.identity import NodeIdentity, NodeIdentityArgs
from aicluster.gcp.network import Network, NetworkArgs
from aicluster.gcp.observability import ObservabilityBackend, ObservabilityBackendArgs, observability_outputs
from aicluster.gcp.slurm import SlurmConfiguration, SlurmConfigurationArgs, SlurmController, SlurmControllerArgs, instance_prefix
from aicluster.gcp.storage import Filestore, FilestoreArgs, ManagedLustre, ManagedLustreArgs



def fabric_check(design: ClusterDesign, pool_name: str) -> tuple[str, int]:
    """What the GPU health check counts on a node (AICLUSTER_FABRIC_KIND, AICLUSTER_FABRIC_DEVICES):
    RDMA devices on A3 Ultra / A4, gVNIC interfaces (host and GPU NICs) on A3 High / A3 Mega."""
    pool = design.pool(pool_name)
    if pool.instance.gpu_nic_stack == "rdma":
        return "rdma", pool.gpu_nics
    if pool.gpu_nics:
        return "gvnic", len(pool.nics)
    return "gvnic", 0


def nic_settings(design: ClusterDesign, pool_name: str) -> dict:
    """The pool's NIC stack as node.env spells it, pinned in the catalog (gcp.yaml nic_stacks)."""
    pool = design.pool(pool_name)
    stack = load_catalog().nic_stacks.get(pool.instance.gpu_nic_stack) if pool.gpu_nics else None
    return {
        "stack": pool.instance.gpu_nic_stack if stack else "none",
        "host_nics": len(pool.nics) - pool.gpu_nics,
        "gpu_nics": pool.gpu_nics,
        "lib_dir": stack.lib_dir if stack else "",
        "nccl_plugin_image": (stack.nccl_plugin_image or "") if stack else "",
        "rxdm_image": (stack.rxdm_image or "") if stack else "",
        "apt_repository": (stack.apt_repository or "") if stack else "",
        "apt_packages": " ".join(stack.apt_packages) if stack else "",
    }


def compute_user_data(design: ClusterDesign, pool_name: str, mounts: list[Mount],
                      controller_addr: str | None = None, munge_secret: str | None = None,
                      bucket: str | None = None) -> str:
    pool = design.pool(pool_name)
    slurm = None
    if controller_addr:
        slurm = {
            "controller": f"{controller_addr}:{SLURMCTLD_PORT}",
            "munge_secret": munge_secret,
            "instance_prefix": instance_prefix(design),
            "dns_domain": node_domain(design.name),
            # The secret helper, with the Google REST module it imports (render/node_programs.py).
            "node_files": [BootFile(path, text, mode) for path, text, mode in node_files(NODE_PROGRAMS, BIN)],
            "bootstrap_script": program_text("aicluster-gcp-node-bootstrap"),
            "healthcheck_script": program_text("aicluster-gpu-healthcheck"),
            "resume_job_script": program_text("aicluster-resume-job"),
            "task_prolog_script": program_text("aicluster-task-prolog"),   # slurm.conf TaskProlog
            # slurm.conf's IMEX Prolog, on every node of a cluster with NVL72 pools only (metadata size).
            "imex_config_script": (program_text("aicluster-imex-config")
                                   if slurm_topology(design).blocks else None),
            "node_local": node_local_programs(),     # /scratch, enroot and pyxis
            # pyxis as the head builds it, from the configuration bucket (node_local_files).
            "bucket": bucket,
            "region": design.region,
            "image_contents": booted_contents(design, pool_name),   # a baked image: installs nothing
        }
    kind, devices = fabric_check(design, pool_name)
    gpus = pool.instance.accelerator_count if pool.instance.accelerator.kind == "gpu" else 0
    return render("cloud-init/compute.yaml.j2", cloud="gcp", cluster=design.name, pool=pool.name, gpus=gpus,
                  fabric_kind=kind, fabric_devices=devices, nic=nic_settings(design, pool_name),
                  fabric_script=program_text("aicluster-gcp-fabric"),
                  mount_script=render("scripts/mount-storage.sh.j2", mounts=mounts), slurm=slurm,
                  local_nvme_devices=local_nvme_devices(pool.instance.name),     # aicluster-scratch
                  nvlink_domain_nodes=pool.nvlink_domain_nodes)     # aicluster-gpu-healthcheck


def _managed_accounting(design: ClusterDesign):
    """The Cloud SQL database of `slurm.accounting: managed` (AccountingDatabase), or None."""
    settings = design.slurm.accounting_settings if design.slurm else None
    return settings.database if settings else None


def build_gcp_cluster(design: ClusterDesign) -> dict[str, pulumi.Output]:
    network = Network(f"{design.name}-network", NetworkArgs(
        context=design.context, network=design.network,
        # Managed Lustre, Filestore and Cloud SQL (managed accounting) get private addresses through it.
        private_service_access=bool(design.storage) or _managed_accounting(design) is not None))
    nodes = NodeIdentity(f"{design.name}-compute", NodeIdentityArgs(design.context))
    # Managed metrics and logs (gcp/observability.py); the node accounts already hold the writer roles.
    observability = ObservabilityBackend(f"{design.name}-observability", ObservabilityBackendArgs(
        context=design.context, log_streams=log_streams(kubernetes=bool(design.kubernetes)),
        gke_cluster=design.kubernetes.gke.cluster_name if design.kubernetes else None,
        alert_rules=rule_groups(monitoring_design(design)), evaluation_interval_s=scrape().evaluation_interval_s,
        alert_emails=design.alert_emails))
    if design.budget:
        # The monthly budget (gcp/budget.py): on the billing account, to the same alert channels.
        from aicluster.gcp.budget import ClusterBudget, ClusterBudgetArgs
        ClusterBudget(f"{design.name}-budget", ClusterBudgetArgs(
            context=design.context, budget=design.budget, notification_channels=observability.alert_channels,
            depends_on=observability.services))
    filesystems: list = []
    for fs in design.storage:
        if fs.kind == "filestore":
            filesystems.append(Filestore(f"{design.name}-{fs.name}", FilestoreArgs(
                context=design.context, storage=fs, network_name=network.network_name, service_access=network.service_access)))
        else:
            filesystems.append(ManagedLustre(f"{design.name}-{fs.name}", ManagedLustreArgs(
                context=design.context, storage=fs, network_id=network.network_id, service_access=network.service_access)))
    mounts = pulumi.Output.all(*[fs.mount for fs in filesystems]) if filesystems else pulumi.Output.from_input([])
    if design.kubernetes:
        # GKE: node pools (GPU NIC networks, compact placement) instead of instance templates, and
        # the GKE control plane instead of a Slurm head node (components/aicluster/gcp/gke.py).
        from aicluster.gcp.gke import attach_gke

        return {"network": network.network_id, "subnetwork": network.subnetwork_self_link,
                "fabric_networks": {key: f.network.self_link for key, f in network.fabric.items()},
                "filesystems": {fs.name: f.instance_id for fs, f in zip(design.storage, filesystems)},
                **observability_outputs(observability),
                **attach_gke(design, network, nodes, filesystems)}

    controller = None
    if design.slurm:
        controller = SlurmController(f"{design.name}-slurm", SlurmControllerArgs(
            context=design.context, slurm=design.slurm, subnetwork=network.subnetwork_self_link,
            compute_identity=nodes, network=network.network_id, own_network=design.network.create_vpc))
        node_inputs = pulumi.Output.all(mounts, controller.controller_addr, controller.munge_secret,
                                        controller.bucket_name)
    else:
        node_inputs = pulumi.Output.all(mounts, None, None, None)

    # The baked node image (gcp/image.py): built here, or one baked before; None: nodes install at boot.
    node_image = design.slurm.node_image if design.slurm else None
    baked_image: pulumi.Input[str] | None = None
    if node_image is not None and node_image.build:
        from aicluster.gcp.image import NodeImage, NodeImageArgs
        baked_image = NodeImage(f"{design.name}-node-image", NodeImageArgs(
            context=design.context, image=node_image, subnetwork=network.subnetwork_self_link)).image_id
    elif node_image is not None:
        baked_image = node_image.image_id
    pools = {
        pool.name: GpuPool(f"{design.name}-{pool.name}", GpuPoolArgs(
            context=design.context, pool=pool, nic_subnetworks=network.nic_subnetworks(pool),
            service_account_email=nodes.email,
            user_data=node_inputs.apply(lambda a, p=pool.name: compute_user_data(design, p, list(a[0]), a[1], a[2], a[3])),
            image=baked_image if node_image and pool.name in node_image.pools else None))
        for pool in design.pools if pool.tpu is None
    }
    if controller:
        # Cloud TPU pools: slices Pulumi creates (TPU VMs), always on, named into the node-name zone.
        from aicluster.gcp.tpu_slice import TpuSlice, TpuSliceArgs, startup_script

        for pool in (p for p in design.pools if p.tpu is not None):
            pools[pool.name] = TpuSlice(f"{design.name}-{pool.name}", TpuSliceArgs(
                context=design.context, pool=pool, network=network.network_id, subnetwork=network.subnetwork_self_link,
                service_account_email=nodes.email, dns_zone=controller.dns_zone,
                startup_script=node_inputs.apply(lambda a, p=pool: startup_script(
                    design, p, list(a[0]), f"{a[1]}:{SLURMCTLD_PORT}", a[2]))))
    outputs = {
        **({"node_image": baked_image} if baked_image is not None else {}),
        "network": network.network_id,
        "subnetwork": network.subnetwork_self_link,
        "fabric_networks": {key: f.network.self_link for key, f in network.fabric.items()},
        "instance_templates": {name: p.instance_template for name, p in pools.items() if p.instance_template},
        "filesystems": {fs.name: f.instance_id for fs, f in zip(design.storage, filesystems)},
        **observability_outputs(observability),
    }
    if controller:
        imports = pulumi.Output.all(*[
            f.instance_id.apply(lambda i, fs=fs: {"instance": i, "uri": fs.import_path, "path": "/"})
            for fs, f in zip(design.storage, filesystems) if fs.kind == "managed-lustre" and fs.import_path])
        tpu_pools = [p for p in design.pools if p.tpu is not None]
        node_addrs = pulumi.Output.all(*[pools[p.name].addresses for p in tpu_pools]).apply(
            lambda a: {node: addr for p, addrs in zip(tpu_pools, a) for node, addr in zip(p.node_names(), addrs)})
        endpoint = None
        if _managed_accounting(design) is not None:
            # slurmdbd's database in Cloud SQL (gcp/accounting_db.py): its private IP and server CA.
            from aicluster.gcp.accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
            database = SlurmdbdDatabase(f"{design.name}-slurmdbd", SlurmdbdDatabaseArgs(
                context=design.context, database=_managed_accounting(design), network_id=network.network_id,
                service_access=network.service_access, password=controller.accounting_password))
            endpoint = pulumi.Output.all(database.address, database.ca_pem).apply(
                lambda a: {"host": a[0], "tls_ca_pem": a[1]})
            outputs["accounting_database"] = database.address
        SlurmConfiguration(f"{design.name}-slurm-config", SlurmConfigurationArgs(
            design=design, controller=controller, compute_identity=nodes, pools=pools, mounts=mounts,
            lustre_imports=imports, node_addrs=node_addrs, accounting_endpoint=endpoint))
        outputs["slurm_controller"] = controller.controller_addr
        outputs["slurm_config_bucket"] = controller.bucket_name
        if design.slurm.login and design.slurm.login.count:
            # Login nodes (gcp/login.py): from the controller's ids only, never the pools.
            from aicluster.gcp.login import LoginNodes, LoginNodesArgs
            login = LoginNodes(f"{design.name}-login", LoginNodesArgs(
                context=design.context, login=design.slurm.login, network=network.network_id,
                subnetwork=network.subnetwork_self_link, controller_addr=controller.controller_addr,
                munge_secret=controller.munge_secret, bucket_name=controller.bucket_name,
                ssh_ingress_cidrs=design.network.ssh_ingress_cidrs, image=baked_image))
            outputs["login_nodes"] = login.private_ips
    return outputs
