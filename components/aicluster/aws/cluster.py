"""The AWS cluster: network, node identity, filesystems, the Slurm controller (or the EKS control
plane), then one GpuPool per pool, then what follows the pools: the Slurm configuration, or the
EKS node groups and the add-ons inside the cluster.

Order matters only through data: pools consume the controller's address and the nodes' programs
in the configuration bucket, the filesystems' mount script among them (for their user data);
filesystems and the controller consume nothing from pools, so scaling or adding pools never
touches storage or the head node.
"""
from __future__ import annotations

import pulumi

from aicluster.render.alert_rules import rules_yaml
from aicluster.design.model import ClusterDesign
from aicluster.design.observability import monitoring_design
from aicluster.render.node_local_files import local_nvme_devices
from aicluster.render.node_image import booted_contents
from aicluster.render.node_programs import node_files
from aicluster.render.slurm_files import BootFile
from aicluster.render.templates import render, static
from aicluster.render.slurm_config import SLURMCTLD_PORT, node_domain
from aicluster.render.slurm_monitoring import role_streams
from aicluster.design.telemetry_backend import log_streams
from aicluster.aws.gpu_pool import GpuPool, GpuPoolArgs
from aicluster.aws.home import HomeFilesystem, HomeFilesystemArgs
from aicluster.aws.iam import NodeIdentity, NodeIdentityArgs
from aicluster.aws.network import Network, NetworkArgs
from aicluster.aws.observability import (CollectorIdentity, CollectorIdentityArgs, ObservabilityBackend, ObservabilityBackendArgs,
                            grant_shipping, observability_outputs)
from aicluster.aws.slurm import (BIN, MOUNT_SCRIPT, NODE_TAG, SlurmConfiguration, SlurmConfigurationArgs, SlurmController,
                    SlurmControllerArgs, SlurmNodeFiles, SlurmNodeFilesArgs, fetch_list)
from aicluster.aws.storage import LustreFilesystem, LustreFilesystemArgs



def compute_user_data(design: ClusterDesign, pool_name: str, *, controller_addr: str, munge_secret: str,
                      bucket: str, files: list[dict], metrics_write_url: str) -> str:
    """A Slurm compute node's cloud-config: its settings, and aicluster-fetch with the list of
    programs to fetch from the configuration bucket (`SlurmNodeFiles.files`). `metrics_write_url`:
    the AMP workspace's remote-write URL, where the node's agent writes (aicluster-monitoring)."""
    pool = design.pool(pool_name)
    slurm = {
        "controller": f"{controller_addr}:{SLURMCTLD_PORT}",
        "munge_secret": munge_secret,
        "node_tag": NODE_TAG,
        "dns_domain": node_domain(design.name),
        "metrics_write_url": metrics_write_url,
        # Where the head publishes pyxis for aicluster-containers (node_local_files).
        "bucket": bucket,
        "region": design.region,
        "image_contents": booted_contents(design, pool_name),   # a baked image: installs nothing
    }
    gpus = pool.instance.accelerator_count if pool.instance.accelerator.kind == "gpu" else 0
    return render("cloud-init/compute.yaml.j2", cluster=design.name, pool=pool.name, gpus=gpus,
                  fabric_devices=pool.efa_devices, gpudirect_rdma=bool(pool.instance.gpudirect_rdma),
                  slurm=slurm, fetch_list=fetch_list(design, bucket, files),
                  fetch_files=[BootFile(path, text, mode) for path, text, mode in node_files(("aicluster-fetch",), BIN)],
                  fetch_bin=f"{BIN}/aicluster-fetch",
                  mount_script=MOUNT_SCRIPT, bootstrap_bin=f"{BIN}/aicluster-node-bootstrap",
                  local_nvme_devices=local_nvme_devices(pool.instance.name),     # aicluster-scratch
                  nvlink_domain_nodes=pool.nvlink_domain_nodes)     # aicluster-gpu-healthcheck


def build_aws_cluster(design: ClusterDesign) -> dict[str, pulumi.Output]:
    network = Network(f"{design.name}-network", NetworkArgs(design.context, design.network))
    nodes = NodeIdentity(f"{design.name}-compute", NodeIdentityArgs(design.context))
    # Managed metrics and logs (aws/observability.py): depends on nothing, so no edit elsewhere touches it.
    observability = ObservabilityBackend(f"{design.name}-observability", ObservabilityBackendArgs(
        context=design.context, log_streams=log_streams(kubernetes=bool(design.kubernetes)),
        # AMP evaluates the alert rules on what the agents send: the in-cluster collector on EKS,
        # every Slurm VM's own agent (slurm_monitoring) on Slurm.
        rules_yaml=rules_yaml(monitoring_design(design)), alert_emails=design.alert_emails,
        on_delete=design.metrics_on_delete, budget_alerts=design.budget is not None))
    if design.budget:
        # The monthly budget (aws/budget.py): alerts into the same topic, once it lets Budgets publish.
        from aicluster.aws.budget import ClusterBudget, ClusterBudgetArgs
        ClusterBudget(f"{design.name}-budget", ClusterBudgetArgs(
            context=design.context, budget=design.budget, topic_arn=observability.alerts_topic_arn,
            depends_on=(observability.alerts_topic_policy,)))
    filesystems = [
        # EFS: the shared /home (aws/home.py), mounted by everything in the nodes' group (compute,
        # head, login); spec.py allows it on Slurm clusters only.
        HomeFilesystem(f"{design.name}-{fs.name}", HomeFilesystemArgs(
            context=design.context, storage=fs, vpc_id=network.vpc_id, subnet_ids=[network.subnet_id],
            client_security_group_ids=[network.nodes_security_group_id]))
        if fs.kind == "efs" else
        LustreFilesystem(f"{design.name}-{fs.name}", LustreFilesystemArgs(
            context=design.context, storage=fs, subnet_id=network.subnet_id,
            security_group_id=network.storage_security_group_id))
        for fs in design.storage
    ]
    mounts = pulumi.Output.all(*[fs.mount for fs in filesystems]) if filesystems else pulumi.Output.from_input([])

    controller = node_inputs = None
    if design.slurm:
        controller = SlurmController(f"{design.name}-slurm", SlurmControllerArgs(
            context=design.context, slurm=design.slurm, vpc_id=network.vpc_id, subnet_id=network.subnet_id,
            public_subnet_id=network.public_subnet_id,
            nodes_security_group_id=network.nodes_security_group_id,
            compute_role_name=nodes.role_name, ssh_ingress_cidrs=design.network.ssh_ingress_cidrs))
        # The nodes' programs, fetched at boot: their user data only lists them (EC2: 16 KB).
        node_files = SlurmNodeFiles(f"{design.name}-slurm-node-files", SlurmNodeFilesArgs(
            controller=controller, compute_role_name=nodes.role_name, mounts=mounts))
        node_inputs = pulumi.Output.all(controller.controller_addr, controller.munge_secret_arn,
                                        controller.bucket_name, node_files.files, observability.remote_write_url)
        # The nodes' agents remote-write and ship logs with their instance role; on EKS a Pod
        # Identity role does it instead (below), never the nodes'.
        # Each role: the log groups of what its nodes ship (slurm_monitoring.log_streams), no other.
        grant_shipping(f"{design.name}-compute-observability", observability, nodes.role_name,
                       streams=role_streams("compute"))
        grant_shipping(f"{design.name}-head-observability", observability, controller.role_name,
                       streams=role_streams("head"))
    eks = None
    if design.kubernetes:
        # Imported here: a Slurm cluster never loads the EKS modules or pulumi_kubernetes.
        from aicluster.aws.eks import EksCluster, EksClusterArgs, attach_kubernetes, eks_pool_security_groups
        from aicluster.aws.eks_nodes import eks_node_user_data
        eks = EksCluster(f"{design.name}-eks", EksClusterArgs(
            context=design.context, kubernetes=design.kubernetes, vpc_id=network.vpc_id,
            subnet_id=network.subnet_id, node_role_name=nodes.role_name, node_role_arn=nodes.role_arn))

    # The baked node image (aws/image.py): built here, or one baked before; None: nodes install at boot.
    node_image = design.slurm.node_image if design.slurm else None
    baked_image_id: pulumi.Input[str] | None = None
    if node_image is not None and node_image.build:
        from aicluster.aws.image import NodeImage, NodeImageArgs
        image = NodeImage(f"{design.name}-node-image", NodeImageArgs(
            context=design.context, image=node_image, vpc_id=network.vpc_id, subnet_id=network.subnet_id,
            bucket_name=controller.bucket_name, bucket_arn=controller.bucket_arn))
        baked_image_id = image.image_id
    elif node_image is not None:
        baked_image_id = node_image.image_id
    pools = {
        pool.name: GpuPool(f"{design.name}-{pool.name}", GpuPoolArgs(
            context=design.context, pool=pool, subnet_id=network.subnet_id,
            security_group_ids=([network.nodes_security_group_id] if eks is None
                                else eks_pool_security_groups(network.nodes_security_group_id, eks)),
            instance_profile_arn=nodes.instance_profile_arn,
            user_data=(node_inputs.apply(lambda a, p=pool.name: compute_user_data(
                design, p, controller_addr=a[0], munge_secret=a[1], bucket=a[2], files=list(a[3]),
                metrics_write_url=a[4]))
                       if eks is None else eks_node_user_data(design, pool.name)),
            launcher="fleet" if eks is None else "eks",
            image_id=baked_image_id if node_image and pool.name in node_image.pools else None))
        for pool in design.pools
    }
    outputs = {
        **({"node_image": baked_image_id} if baked_image_id is not None else {}),
        "vpc_id": network.vpc_id,
        "subnet_id": network.subnet_id,
        "launch_templates": {name: p.launch_template_id for name, p in pools.items()},
        "filesystems": {fs.name: f.file_system_id for fs, f in zip(design.storage, filesystems)},
        **observability_outputs(observability),
    }
    if eks:
        outputs |= attach_kubernetes(design, eks, pools, filesystems, network.subnet_id, nodes.role_arn,
                                     instance_profile_arn=nodes.instance_profile_arn,
                                     nodes_security_group_id=network.nodes_security_group_id,
                                     remote_write_url=observability.remote_write_url)
        # The collector's agents remote-write and ship logs with a Pod Identity role, never the nodes'.
        CollectorIdentity(f"{design.name}-collector", CollectorIdentityArgs(
            context=design.context, backend=observability, cluster_name=eks.cluster_name,
            depends_on=eks.before_nodes))
    if controller:
        accounting = design.slurm.accounting_settings
        endpoint = None
        if accounting and accounting.database:
            # slurmdbd's database in RDS (aws/accounting_db.py): the head reaches it by name.
            from aicluster.aws.accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
            database = SlurmdbdDatabase(f"{design.name}-slurmdbd", SlurmdbdDatabaseArgs(
                context=design.context, database=accounting.database, vpc_id=network.vpc_id,
                head_security_group_id=controller.head_security_group_id, password=controller.accounting_password))
            endpoint = database.address.apply(lambda host: {"host": host})
            outputs["accounting_database"] = database.address
        SlurmConfiguration(f"{design.name}-slurm-config", SlurmConfigurationArgs(
            design=design, controller=controller, compute_role_arn=nodes.role_arn, pools=pools,
            subnet_id=network.subnet_id, mounts=mounts, accounting_endpoint=endpoint,
            metrics_write_url=observability.remote_write_url))
        outputs["slurm_controller"] = controller.controller_addr
        outputs["slurm_config_bucket"] = controller.bucket_name
        if design.slurm.login and design.slurm.login.count:
            # Login nodes (aws/login.py): from the controller's ids only, never the pools.
            from aicluster.aws.login import LoginNodes, LoginNodesArgs
            login = LoginNodes(f"{design.name}-login", LoginNodesArgs(
                context=design.context, login=design.slurm.login, vpc_id=network.vpc_id,
                subnet_id=network.subnet_id, nodes_security_group_id=network.nodes_security_group_id,
                controller_addr=controller.controller_addr, munge_secret_arn=controller.munge_secret_arn,
                bucket_name=controller.bucket_name, bucket_arn=controller.bucket_arn,
                ssh_ingress_cidrs=design.network.ssh_ingress_cidrs, metrics_write_url=observability.remote_write_url,
                image_id=baked_image_id))
            grant_shipping(f"{design.name}-login-observability", observability, login.role_name,
                           streams=role_streams("login"))
            outputs["login_nodes"] = login.private_ips
    return outputs
