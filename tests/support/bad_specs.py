"""Spec builders and the table of bad specs (shape and meaning) shared by tests/test_spec.py and
tests/safety/test_bad_specs.py."""
from __future__ import annotations

import copy

from tests.support import AWS_MIN, CR, FSX, GCP_MIN

VPC = "vpc-0123456789abcdef0"
SUBNET = "subnet-0123456789abcdef0"


def spec(base=AWS_MIN, **top):
    """A deep copy of `base` with top-level keys replaced."""
    out = copy.deepcopy(base)
    out.update(copy.deepcopy(top))
    return out


def pool(base=AWS_MIN, **keys):
    """A deep copy of `base` with keys of pools[0] replaced."""
    out = copy.deepcopy(base)
    out["pools"][0].update(copy.deepcopy(keys))
    return out


def drop(base, key):
    out = copy.deepcopy(base)
    del out[key]
    return out


BAD = [
    ("unknown-top-key", spec(tagz={"a": "b"}), "tagz", "tagz", "unknown key", "tags"),
    ("unknown-pool-key", pool(maxnodes=3), "pools[0].maxnodes", "maxnodes", "max_nodes", "max_nodes"),
    ("unknown-storage-key", spec(storage=[{**FSX, "capacity": 1200}]), "storage[0].capacity", "capacity",
     "capacity_gib", "capacity_gib"),
    ("unknown-instance-type", pool(instance_type="p5.48xl"), "pools[0].instance_type", "p5.48xl",
     "p5.48xlarge", "p5.48xlarge"),
    ("gcp-type-on-aws", pool(instance_type="a3-megagpu-8g"), "pools[0].instance_type", "a3-megagpu-8g",
     "a3-megagpu-8g is a gcp type", None),
    ("aws-type-on-gcp", pool(GCP_MIN, instance_type="p5.48xlarge"), "pools[0].instance_type", "p5.48xlarge",
     "p5.48xlarge is a aws type", None),
    ("cloud-azure", spec(cloud="azure"), "cloud", "azure", "aws, gcp", None),
    ("scheduler-typo", spec(scheduler="slurmm"), "scheduler", "slurmm", "slurm, kubernetes", "slurm"),
    ("negative-max-nodes", pool(max_nodes=-1), "pools[0].max_nodes", -1, ">= 1", None),
    ("zero-max-nodes", pool(max_nodes=0), "pools[0].max_nodes", 0, ">= 1", None),
    ("negative-min-nodes", pool(min_nodes=-2), "pools[0].min_nodes", -2, ">= 0", None),
    ("min-above-max", pool(min_nodes=5, max_nodes=4), "pools[0].min_nodes", 5, "at most max_nodes (4)", None),
    ("aws-zone-outside-region", spec(zone="us-west-2a"), "zone", "us-west-2a", "inside region us-east-1", None),
    ("gcp-zone-outside-region", spec(GCP_MIN, zone="us-east1-b"), "zone", "us-east1-b",
     "inside region us-central1", None),
    ("gcp-zone-aws-style", spec(GCP_MIN, zone="us-central1a"), "zone", "us-central1a", "us-central1-a", None),
    ("aws-region-format", spec(region="useast1", zone="useast1a"), "region", "useast1", "us-east-1", None),
    ("gcp-region-format", spec(GCP_MIN, region="us-central-1", zone="us-central-1-a"), "region",
     "us-central-1", "us-central1", None),
    ("duplicate-pool-names", spec(pools=[{"name": "gpu", "instance_type": "h100", "max_nodes": 2},
                                         {"name": "gpu", "instance_type": "a100", "max_nodes": 2}]),
     "pools[1].name", "gpu", "unique", None),
    ("uppercase-pool-name", pool(name="GPU"), "pools[0].name", "GPU", "lowercase", None),
    ("duplicate-storage-names", spec(storage=[FSX, {**FSX, "mount": "/data"}]), "storage[1].name", "fsx",
     "unique", None),
    ("overlapping-mounts", spec(storage=[FSX, {**FSX, "name": "data", "mount": "/fsx/data"}]),
     "storage[1].mount", "/fsx/data", "/fsx", None),
    ("reserved-mount-usr", spec(storage=[{**FSX, "mount": "/usr"}]), "storage[0].mount", "/usr", "/fsx", None),
    ("relative-mount", spec(storage=[{**FSX, "mount": "fsx"}]), "storage[0].mount", "fsx", "matching", None),
    ("storage-type", spec(storage=[{**FSX, "type": "nfs"}]), "storage[0].type", "nfs", "lustre", None),
    ("deployment-type-typo", spec(storage=[{**FSX, "deployment_type": "PERSISTENT2"}]),
     "storage[0].deployment_type", "PERSISTENT2", "PERSISTENT_2", "PERSISTENT_2"),
    ("import-path-gs-on-aws", spec(storage=[{**FSX, "import_path": "gs://bucket/data"}]),
     "storage[0].import_path", "gs://bucket/data", "s3://", None),
    ("import-path-s3-on-gcp", spec(GCP_MIN, storage=[{**FSX, "capacity_gib": 18000,
                                                      "import_path": "s3://bucket/data"}]),
     "storage[0].import_path", "s3://bucket/data", "gs://", None),
    ("cidr-does-not-parse", spec(network={"vpc_cidr": "10.0.0/16x"}), "network.vpc_cidr", "10.0.0/16x",
     "IPv4 CIDR", None),
    ("cidr-host-bits", spec(network={"vpc_cidr": "10.0.0.1/16"}), "network.vpc_cidr", "10.0.0.1/16",
     "no host bits", "10.0.0.0/16"),
    ("alert-email-not-an-address", spec(monitoring={"alert_emails": ["oncall"]}),
     "monitoring.alert_emails[0]", "oncall", "a string matching", None),
    ("alert-email-key-misspelt", spec(monitoring={"alert_email": ["oncall@example.com"]}),
     "monitoring.alert_email", "alert_email", "alert_emails", "alert_emails"),
    ("budget-negative", spec(cost={"monthly_budget_usd": -100}), "cost.monthly_budget_usd", -100, ">= 0.01", None),
    ("budget-gcp-account-lower-case", spec(GCP_MIN, cost={"monthly_budget_usd": 100, "billing_account": "0a1b2c-3d4e5f-6a7b8c"}),
     "cost.billing_account", "0a1b2c-3d4e5f-6a7b8c", "XXXXXX-XXXXXX-XXXXXX", "0A1B2C-3D4E5F-6A7B8C"),
    ("ssh-cidr-host-bits", spec(network={"ssh_ingress_cidrs": ["203.0.113.7/24"]}),
     "network.ssh_ingress_cidrs[0]", "203.0.113.7/24", "no host bits", "203.0.113.0/24"),
    ("ssh-cidr-does-not-parse", spec(network={"ssh_ingress_cidrs": ["example.com"]}),
     "network.ssh_ingress_cidrs[0]", "example.com", "IPv4 CIDR", None),
    ("ssh-cidrs-overlap", spec(network={"ssh_ingress_cidrs": ["198.51.100.0/24", "198.51.100.128/25"]}),
     "network.ssh_ingress_cidrs[1]", "198.51.100.128/25", "overlap", None),
    ("vpc-cidr-public", spec(network={"vpc_cidr": "8.8.0.0/16"}), "network.vpc_cidr", "8.8.0.0/16",
     "private", None),
    ("vpc-cidr-slash-8", spec(network={"vpc_cidr": "10.0.0.0/8"}), "network.vpc_cidr", "10.0.0.0/8",
     "/16 to /24", None),
    ("vpc-cidr-slash-28", spec(network={"vpc_cidr": "10.0.0.0/28"}), "network.vpc_cidr", "10.0.0.0/28",
     "/16 to /24", None),
    ("vpc-cidr-with-existing", spec(network={"vpc_cidr": "10.0.0.0/16",
                                             "existing": {"vpc_id": VPC, "subnet_id": SUBNET}}),
     "network.vpc_cidr", "10.0.0.0/16", "network.existing", None),
    ("existing-bad-vpc-id", spec(network={"existing": {"vpc_id": "vpc-xyz", "subnet_id": SUBNET}}),
     "network.existing.vpc_id", "vpc-xyz", "vpc-0123456789abcdef0", None),
    ("existing-bad-subnet-id", spec(network={"existing": {"vpc_id": VPC, "subnet_id": "sn-1"}}),
     "network.existing.subnet_id", "sn-1", "subnet-0123456789abcdef0", None),
    ("reservation-without-id", pool(capacity="reservation"), "pools[0].capacity.reservation_id", None,
     "required for capacity type reservation", None),
    ("capacity-block-without-id", pool(capacity={"type": "capacity-block"}), "pools[0].capacity.reservation_id",
     None, "required for capacity type capacity-block", None),
    ("reservation-id-with-on-demand", pool(capacity={"type": "on-demand", "reservation_id": CR}),
     "pools[0].capacity.reservation_id", CR, "only with capacity type reservation or capacity-block", None),
    ("bad-aws-reservation-id", pool(capacity={"type": "reservation", "reservation_id": "my-res"}),
     "pools[0].capacity.reservation_id", "my-res", "cr-0123456789abcdef0", None),
    ("capacity-type-typo", pool(capacity="spots"), "pools[0].capacity.type", "spots", "on-demand, spot", "spot"),
    ("capacity-block-on-gcp", pool(GCP_MIN, capacity={"type": "capacity-block", "reservation_id": "res-a"}),
     "pools[0].capacity.type", "capacity-block", "on gcp use reservation or spot", None),
    ("efa-on-gcp", pool(GCP_MIN, efa=True), "pools[0].efa", True, "only on aws", None),
    ("max-nodes-string", pool(max_nodes="4"), "pools[0].max_nodes", "4", "a whole number", None),
    ("max-nodes-bool", pool(max_nodes=True), "pools[0].max_nodes", True, "a whole number", None),
    ("max-nodes-float", pool(max_nodes=4.5), "pools[0].max_nodes", 4.5, "a whole number", None),
    ("efa-number", pool(efa=[True]), "pools[0].efa", [True], "true or false", None),
    ("root-volume-too-small", pool(root_volume_gib=10), "pools[0].root_volume_gib", 10, ">= 75", None),
    ("bad-aws-image", pool(image="my-image"), "pools[0].image", "my-image", "ami-", None),
    ("root-list", [AWS_MIN], "", [AWS_MIN], "a mapping", None),
    ("root-string", "name: test", "", "name: test", "a mapping", None),
    ("root-none", None, "", None, "a mapping", None),
    ("pools-empty", spec(pools=[]), "pools", [], "at least 1", None),
    ("pools-missing", drop(AWS_MIN, "pools"), "pools", None, "required", None),
    ("name-missing", drop(AWS_MIN, "name"), "name", None, "required", None),
    ("tag-key-aws-reserved", spec(tags={"aws:foo": "x"}), "tags.aws:foo", "aws:foo", "reserved", None),
    ("tag-key-aicluster-reserved", spec(tags={"aicluster-role": "x"}), "tags.aicluster-role",
     "aicluster-role", "reserved", None),
    # A key that becomes a reserved GCP label (gcp.common.label_key: lower-cased, `.` and `:` -> `-`)
    # is refused on both clouds: aicluster.node would land on every instance as aicluster-node.
    ("tag-key-becomes-aicluster-label", spec(tags={"aicluster.node": "x"}), "tags.aicluster.node",
     "aicluster.node", "aicluster.node becomes the GCP label aicluster-node", None),
    ("tag-key-becomes-aicluster-label-gcp", spec(GCP_MIN, tags={"AICLUSTER:Pool": "x"}), "tags.AICLUSTER:Pool",
     "AICLUSTER:Pool", "AICLUSTER:Pool becomes the GCP label aicluster-pool", None),
    ("tag-value-not-string", spec(tags={"team": 7}), "tags.team", 7, "a string", None),
    ("workload-negative", spec(workload={"model_params_b": -7}), "workload.model_params_b", -7, "> 0", None),
]
