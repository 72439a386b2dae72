"""The AWS cluster: network, node identity, filesystems, then one GpuPool per pool.

Order matters only through data: pools consume the filesystems' mounts (for their user data);
filesystems consume nothing from pools, so scaling or adding pools never touches storage.
"""
from __future__ import annotations

import pulumi

from ..design import ClusterDesign
from ..mounts import Mount
from ..render import render
from .gpu_pool import GpuPool, GpuPoolArgs
from .iam import NodeIdentity, NodeIdentityArgs
from .network import Network, NetworkArgs
from .storage import LustreFilesystem, LustreFilesystemArgs


def compute_user_data(design: ClusterDesign, pool_name: str, mounts: list[Mount]) -> str:
    pool = design.pool(pool_name)
    script = render("scripts/mount-storage.sh.j2", mounts=mounts)
    return render("cloud-init/compute.yaml.j2", cluster=design.name, pool=pool.name,
                  fabric_devices=pool.efa_devices, mount_script=script)


def build_aws_cluster(design: ClusterDesign) -> dict[str, pulumi.Output]:
    network = Network(f"{design.name}-network", NetworkArgs(design))
    nodes = NodeIdentity(f"{design.name}-compute", NodeIdentityArgs(design))
    filesystems = [
        LustreFilesystem(f"{design.name}-{fs.name}", LustreFilesystemArgs(
            cluster=design, storage=fs, subnet_id=network.subnet_id,
            security_group_id=network.storage_security_group_id))
        for fs in design.storage
    ]
    mounts = pulumi.Output.all(*[fs.mount for fs in filesystems]) if filesystems else pulumi.Output.from_input([])
    pools = {
        pool.name: GpuPool(f"{design.name}-{pool.name}", GpuPoolArgs(
            cluster=design, pool=pool, subnet_id=network.subnet_id,
            security_group_ids=[network.nodes_security_group_id],
            instance_profile_arn=nodes.instance_profile_arn,
            user_data=mounts.apply(lambda ms, p=pool.name: compute_user_data(design, p, list(ms)))))
        for pool in design.pools
    }
    return {
        "vpc_id": network.vpc_id,
        "subnet_id": network.subnet_id,
        "launch_templates": {name: p.launch_template_id for name, p in pools.items()},
        "filesystems": {fs.name: f.file_system_id for fs, f in zip(design.storage, filesystems)},
    }
