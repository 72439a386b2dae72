"""The aicluster CrossGuard rules, one per module, in report order.

Each module defines ID, SUPPORTED (the raw resource types it reads) and POLICY: a pulumi_policy
ResourceValidationPolicy or StackValidationPolicy whose `name` is the stable rule id, whose
`display_name` is the rule's name, with description, severity, default enforcement level,
remediation steps and config schema. `policies/__main__.py` packs POLICIES for
`pulumi preview --policy-pack policies`; `aicluster check` runs the very same objects offline.
"""
from __future__ import annotations

from . import (cmp_001_one_instance_type, cmp_002_head_node_sized, cst_001_required_tags, cst_002_cost_ceiling,
               cst_003_train_cost_ceiling, mem_001_training_state, mem_002_layout_fits_hbm, net_001_fabric_wired,
               net_002_fabric_placement, net_003_efa_security_group, net_004_one_zone, net_005_exposed_communication,
               net_006_nvlink_domain, sec_001_imdsv2, sec_002_no_public_ip, sec_003_encrypted, sec_004_no_world_ssh,
               sec_005_user_data_secrets, sec_006_database_private, sto_001_parallel_filesystem,
               sto_002_throughput_floor, sto_003_checkpoint_stall, sto_004_fsx_valid, sto_005_protected,
               sto_006_workload_storage)

PACK_NAME = "aicluster-balanced-cluster"
PACK_DESCRIPTION = ("Balanced compute, network and storage, and safe defaults, for AI training clusters on AWS "
                    "and GCP: judged on raw cloud resources, so hand-written stacks are checked too.")

RULES = (
    net_001_fabric_wired, net_002_fabric_placement, net_003_efa_security_group, net_004_one_zone,
    net_005_exposed_communication, net_006_nvlink_domain, sto_001_parallel_filesystem, sto_002_throughput_floor,
    sto_003_checkpoint_stall, sto_004_fsx_valid, sto_005_protected, sto_006_workload_storage, mem_001_training_state,
    mem_002_layout_fits_hbm,
    cmp_001_one_instance_type, cmp_002_head_node_sized, sec_001_imdsv2, sec_002_no_public_ip, sec_003_encrypted,
    sec_004_no_world_ssh, sec_005_user_data_secrets, sec_006_database_private, cst_001_required_tags,
    cst_002_cost_ceiling, cst_003_train_cost_ceiling,
)
POLICIES = [rule.POLICY for rule in RULES]
