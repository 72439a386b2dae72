"""The raw resource types the model reads, and the tags and labels it understands."""
from __future__ import annotations

# AWS
LT, ASG, NODE_GROUP, INSTANCE = "aws:ec2/launchTemplate", "aws:autoscaling/group", "aws:eks/nodeGroup", "aws:ec2/instance"
PLACEMENT_GROUP, SUBNET, SG, ENI = "aws:ec2/placementGroup", "aws:ec2/subnet", "aws:ec2/securityGroup", "aws:ec2/networkInterface"
FSX = "aws:fsx/lustreFileSystem"
EFS = "aws:efs/fileSystem"
# GCP
GCE, GCE_TEMPLATE, GCE_REGION_TEMPLATE = "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:compute/regionInstanceTemplate"
MIG, REGION_MIG, RESOURCE_POLICY = "gcp:compute/instanceGroupManager", "gcp:compute/regionInstanceGroupManager", "gcp:compute/resourcePolicy"
GKE_POOL, TPU_VM = "gcp:container/nodePool", "gcp:tpu/v2Vm"
GCP_LUSTRE, FILESTORE = "gcp:lustre/instance", "gcp:filestore/instance"

HINT_TAGS = {
    "model_params_b": "aicluster-model-params-b",
    "checkpoint_interval_min": "aicluster-checkpoint-interval-min",
    "max_checkpoint_stall_pct": "aicluster-max-checkpoint-stall-pct",
}
MAX_NODES_TAG = "aicluster-max-nodes"
# The Slurm partition a pool shares with others (pools[].partition): one job spans them.
PARTITION_TAG = "aicluster-partition"
ZONE_TAG = "aicluster-zone"     # GCP instance templates are global: the zone their nodes launch in
NOT_A_POOL = ("head", "control-plane", "login")   # aicluster-role values that are never a pool
HEAD_ROLES = ("head", "control-plane")            # aicluster-role values of a head node
CONFIG_SOURCE = "policy config poolNodes"          # nodes_source of a size the policy config gives
