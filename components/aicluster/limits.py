"""Input limits: how much input aicluster reads, and how long the spec's lists may be.

One table for every bound on what a user hands aicluster (spec and stack files, policy configs,
waivers). Each limit says what it bounds and why: a cloud's documented limit (`source`), or
aicluster's own bound that keeps every command within seconds and bounded memory on any input.
Over a limit, the input is refused with a SpecError naming its path; nothing is truncated.

The clouds' limits on what aicluster *renders* (user data size, name lengths, tags per resource)
live in catalog/limits.yaml; this module bounds the input before any of that is computed.
Pure: no import beyond the standard library, so the file loader can use it first.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """One input bound: its value, what it bounds and where it comes from."""
    value: int
    what: str
    source: str     # the cloud document that sets it, or why aicluster sets it


# --- files -------------------------------------------------------------------------------------

FILE_BYTES = Limit(
    1024 * 1024, "bytes in one spec, stack, policy config or waivers file",
    "aicluster's own: the largest example stack is about 2 KB and a 64-pool spec about 20 KB; reading and "
    "parsing 1 MiB takes under 2 s. Files are read with a bounded read, so /dev/zero or a FIFO cannot "
    "exhaust memory or block")
YAML_DEPTH = Limit(
    32, "levels of nesting (mappings and lists) in a YAML or JSON file",
    "aicluster's own: the deepest spec path (config > aicluster:cluster > pools > [i] > capacity > type) "
    "is 6 levels; the parser's own recursion would fail (Python) or crash (libyaml) near 1,000")
YAML_VALUES = Limit(
    100_000, "values (scalars, lists, mappings) in one file, counting every use of an alias (*name) anew",
    "aicluster's own: a 64-pool spec holds under 1,000; aliases that repeat aliases (a 'billion laughs' "
    "file) would otherwise expand to more values than memory holds")
SCALAR_CHARS = Limit(
    65_536, "characters in one scalar (a string, a number, a key)",
    "aicluster's own: spec strings are at most 256 characters (names 24-32, tags 63); stack files may hold "
    "encrypted Pulumi secrets of a few KB")
INT_DIGITS = Limit(
    100, "characters in one integer literal",
    "aicluster's own: the largest count the spec takes is 10,000,000 (capacity_gib); Python refuses to "
    "convert integers of over 4,300 digits, and YAML 1.1 base-60 integers (1:2:3) grow with every part")

# --- the spec (paths in the cluster spec; lists of items) ----------------------------------------

POOLS = Limit(64, "pools in one cluster",
              "aicluster's own: each pool is a launch or instance template, a placement group and a Slurm "
              "partition (or a node pool); 64 is far above any cluster's shapes")
STORAGE = Limit(16, "filesystems in one cluster",
                "aicluster's own: every node mounts every filesystem at boot")
SSH_INGRESS_CIDRS = Limit(
    60, "network.ssh_ingress_cidrs",
    "Amazon VPC User Guide, 'Amazon VPC quotas', Security groups: 60 inbound rules per security group "
    "(per IP version, default quota); the head node's security group holds one SSH rule per CIDR")
API_ACCESS_CIDRS = Limit(
    40, "kubernetes.api_access_cidrs",
    "Amazon EKS User Guide, 'Amazon EKS service quotas': public endpoint access CIDR ranges per cluster, 40, "
    "not adjustable (GKE takes 50 authorized networks: the smaller applies)")
ADMINS = Limit(32, "kubernetes.admins",
               "aicluster's own: one EKS access entry per ARN; grant a role to a team instead of an entry "
               "per person")
CONTROL_PLANE_SUBNETS = Limit(
    16, "kubernetes.control_plane_subnet_ids",
    "aicluster's own: EKS needs two subnets in two zones; no region has 16 zones")
TEAMS = Limit(
    32, "kubernetes.teams",
    "aicluster's own: each team is a namespace, a LocalQueue and a ClusterQueue that lists every pool's "
    "flavor; Kueue re-evaluates a cohort's queues on every admission, so a cohort is kept to a few dozen")

# The lists above by their path in the spec: checked on the raw data before the spec's models
# see it, so an over-long list costs one len() and never reaches a per-item check.
SPEC_LISTS: dict[tuple[str, ...], Limit] = {
    ("pools",): POOLS,
    ("storage",): STORAGE,
    ("network", "ssh_ingress_cidrs"): SSH_INGRESS_CIDRS,
    ("kubernetes", "api_access_cidrs"): API_ACCESS_CIDRS,
    ("kubernetes", "admins"): ADMINS,
    ("kubernetes", "control_plane_subnet_ids"): CONTROL_PLANE_SUBNETS,
    ("kubernetes", "teams"): TEAMS,
}

# --- waivers -----------------------------------------------------------------------------------

WAIVERS = Limit(1000, "waivers in one waivers file",
                "aicluster's own: every finding is matched against every waiver")
WAIVER_TEXT = Limit(2048, "characters in a waiver's rule, resource, reason or stack",
                    "aicluster's own: a Pulumi URN of a nested component is a few hundred characters")

# --- reporting ---------------------------------------------------------------------------------

PROBLEMS_SHOWN = Limit(100, "problems printed for one input (the rest are counted)",
                       "aicluster's own: a report a person reads; fix the first ones and run again")
PATH_CHARS = Limit(200, "characters of a YAML path shown in a problem",
                   "aicluster's own: a key of 64 KB would otherwise be printed whole")

ALL: dict[str, Limit] = {name: value for name, value in globals().items() if isinstance(value, Limit)}
