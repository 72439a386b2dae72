#!/usr/bin/python3
"""Slurm power-saving programs for aicluster on GCP: resume, suspend and resume-fail.

slurmctld runs this file through three links, each with one argument, a Slurm hostlist:

    aicluster-resume      gpu-[3-5,9]   create one instance per node (Compute Engine bulkInsert)
                                        and write its name into the cluster's DNS zone
    aicluster-suspend     gpu-[3-5]     delete the nodes' instances, found by the cluster label and
                                        their names, and the nodes' DNS records
    aicluster-resume-fail gpu-4         the same deletion; Slurm has set them down
    aicluster-reconcile                 the reconcile loop (aicluster.node.reconcile), with this
                                        file's Gce.list_cluster

or directly: aicluster-gcp-power.py resume|suspend|resume-fail HOSTLIST.

Resume sends one zonal instances.bulkInsert per launch: all or nothing (minCount = count), from
the pool's instance template, into the pool's compact placement policy or its reservation, one
instance per node named <instance_prefix><node> (cluster.json; <cluster>-<digest>-: unique to the
cluster, so two clusters of a zone never share a name), labelled at creation with the cluster, the
pool and the launch's request id (aicluster-resume-id), which is also the bulkInsert's requestId: a
retry after a lost answer creates nothing twice, and a failed launch deletes only the instances
with its own id. A node that already has a live instance keeps it (a duplicate resume is a no-op).

Whose instance is it: a node's name is its instance's name less the prefix, never a label (a
user's tag may become any label); an instance is this cluster's only when its cluster label says
so, checked on each instance (a listing's filter is the server's) before it is deleted or its
address adopted. Another cluster's instance under one of this cluster's names is left alone and
its node set DOWN with the reason. The head and login VMs carry the cluster label but are named for
no node: no program here lists, ends or adopts them. Resume then
writes the A record <node>.<dns_domain> -> its address into the cluster's Cloud DNS private zone
(node names resolve through DNS: SlurmctldParameters=cloud_dns; every node searches dns_domain),
in Cloud DNS changes of up to 1,000 records, and sets the node's address in Slurm. Suspend and
resume-fail delete the records the same way (a missing one is fine). Any error (a stockout such
as ZONE_RESOURCE_POOL_EXHAUSTED, a quota, a bad reservation) sets the nodes DOWN with the error
as the reason, so their jobs requeue, never silently (slurm-gcp #3337 is the counter-example).

It runs with the head node's system python3 only: resume, suspend and hostlists come from
aicluster.node.slurm (the core both clouds share), the Google APIs from aicluster.node.gcp, both
installed with it; this file holds only the Compute Engine and Cloud DNS calls. The cluster's facts come from
/etc/aicluster/cluster.json (AICLUSTER_CONFIG overrides), published by aicluster.
"""
from __future__ import annotations

import dataclasses
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

# Resume and suspend, hostlists, scontrol, DOWN reasons, logging: the core every cloud shares
# (aicluster.node.slurm). This file holds the Compute Engine and Cloud DNS calls.
from aicluster.node import reconcile
from aicluster.node import slurm as core
from aicluster.node.gcp import ApiError, Compute, Dns, operation_error, retryable
from aicluster.node.slurm import NODE_RECORD_TTL_S, CloudError, compress_hostlist, log

# Instances per bulkInsert: "You can create up to 5,000 VMs with each call"
# (https://cloud.google.com/compute/docs/instances/multiple/about-bulk-creation).
BULK_INSERT_LIMIT = 5000
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
CONFIG_KEYS = ("cluster", "project", "zone", "cluster_label", "instance_prefix", "pools")
# The label every instance carries from its bulkInsert on: the resume request that created it
# (a UUID: lower-case letters, digits and '-', as label values allow). A failed launch deletes
# only the instances with its own id.
RESUME_ID_LABEL = "aicluster-resume-id"
DEFAULT_POOL_LABEL = "aicluster-pool"
ROLE_LABEL = "aicluster-role"           # compute on the pools' instances (their templates); head, login
# Instance statuses (https://cloud.google.com/compute/docs/instances/instance-life-cycle) in the
# three words of core.Instance.state. Anything else (STOPPING, SUSPENDING, SUSPENDED, TERMINATED)
# runs no node but still holds the node's instance name and disks: "stopping".
STATES = {"PROVISIONING": "pending", "STAGING": "pending", "REPAIRING": "pending", "RUNNING": "running"}
# Spot and preemptible VMs that Compute Engine takes back go STOPPING, then TERMINATED or deleted
# (https://cloud.google.com/compute/docs/instances/spot#preemption-process).
PREEMPTED_STATUSES = ("STOPPING", "TERMINATED", "SUSPENDING", "SUSPENDED")
# Guest attributes are read one instance per call: at most this many a listing (the youngest
# running instances, in random order, so every one is read within a few passes at any size).
GUEST_ATTRIBUTE_READS = 100
DEFAULT_RESUME_TIMEOUT_S = 1800
# Instances deleted at once: each is its own instances.delete (Compute Engine has no bulk delete).
DELETE_PARALLELISM = 8
# A launch of at most this many nodes looks its names up by a name filter; a larger one lists the
# cluster (a filter of 2,000 names would not fit in a URL).
NAME_FILTER_MAX = 100
# Cloud DNS limits of one change (changes.create): "Additions per change 1,000", "Deletions per
# change 1,000", "Resource record data size per change 100,000 bytes"
# (https://cloud.google.com/dns/quotas, Limits).
DNS_CHANGE_ADDITIONS = 1000
DNS_CHANGE_DELETIONS = 1000
DNS_CHANGE_RRDATA_BYTES = 100_000
# https://cloud.google.com/compute/docs/naming-resources#resource-name-format
INSTANCE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def instance_name(config: dict, node: str) -> str:
    return f"{config['instance_prefix']}{node}"


def legacy_prefix(config: dict) -> str:
    """How instances were named before the prefix carried a digest of the cluster name: <cluster>-.
    A cluster upgraded while its nodes run still has such instances; they are recognised (their
    pool label must agree with the name, as no head or login VM's does), never created."""
    return f"{config['cluster']}-"


def record_name(config: dict, node: str) -> str:
    return f"{node}.{config['dns_domain'].rstrip('.')}."


def record_set(name: str, address: str) -> dict:
    return {"name": name, "type": "A", "ttl": NODE_RECORD_TTL_S, "rrdatas": [address]}


def change_batches(items: list, limit: int) -> list[list]:
    """`items` ((node, record set) pairs) cut into changes within Cloud DNS's per-change limits:
    `limit` record sets, and DNS_CHANGE_RRDATA_BYTES of record data (counted as text, which is
    never smaller than the wire form of an A record)."""
    batches, current, size = [], [], 0
    for item in items:
        data = sum(len(r) for r in item[1].get("rrdatas") or [])
        if current and (len(current) == limit or size + data > DNS_CHANGE_RRDATA_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += data
    return batches + [current] if current else batches


class NodeRecords(core.NodeRecords):
    """The A records <node>.<dns_domain> of the cluster's Cloud DNS private zone, written and
    deleted in changes of up to a thousand records (a 2,000-node resume makes two calls, not
    2,000). A change is all or nothing: one that Cloud DNS refuses for good is retried record by
    record, so one bad record fails its own node only, as set_addresses does with scontrol; one
    that still fails after the client's retries (throttling, a lost network) fails its own nodes."""

    def __init__(self, dns, config: dict, compute=None):
        self.dns, self.config = dns, config
        self.compute = compute          # whose deadline (set by the core) the DNS calls keep too

    def _keep_deadline(self) -> None:
        if self.compute is not None and hasattr(self.dns, "deadline"):
            self.dns.deadline = getattr(self.compute, "deadline", None)

    def upsert(self, addresses: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Write node -> address; node -> (code, message) of the records Cloud DNS refused."""
        self._keep_deadline()
        wanted = [(node, record_set(record_name(self.config, node), address)) for node, address in addresses.items()]
        refused: dict[str, tuple[str, str]] = {}
        zone: dict[str, dict] | None = None         # read once, only when a batch meets records already there
        for batch in change_batches(wanted, DNS_CHANGE_ADDITIONS):
            try:
                self.dns.change(additions=[r for _, r in batch])
                continue
            except ApiError as err:
                problem = err
            if problem.status == 409:               # alreadyExists: nodes launched again, or a lost answer
                try:
                    zone = self.dns.list_a() if zone is None else zone
                    additions = [r for _, r in batch if zone.get(r["name"]) != r]
                    deletions = [zone[r["name"]] for r in additions if r["name"] in zone]
                    if additions:
                        self.dns.change(additions=additions, deletions=deletions)
                    continue
                except ApiError as err:             # changed meanwhile, or refused: record by record
                    problem, zone = err, None
            refused.update(self._refused_batch(batch, problem, "resume", "writing"))
        return refused

    def _refused_batch(self, batch: list, problem: ApiError, action: str, what: str) -> dict[str, tuple[str, str]]:
        """The nodes of a refused change that fail: all of them when it failed after the client's
        retries (throttling, a lost network: one more call each would fail the same way, past the
        deadline); else those whose own record Cloud DNS refuses, record by record."""
        if not transient(problem):
            log.warning("%s: a change of %d DNS records was refused (%s: %s): one record at a time", action,
                        len(batch), problem.code, problem.message)
            return self._each(batch, action, what)
        nodes = [node for node, _ in batch]
        log.error("%s: %s the DNS records of %s failed: %s: %s", action, what, compress_hostlist(nodes),
                  problem.code, problem.message)
        return {node: (problem.code, problem.message) for node in nodes}

    def _each(self, batch: list, action: str, what: str) -> dict[str, tuple[str, str]]:
        """One call per record (rrsets create or patch, delete; a missing record is fine)."""
        refused = {}
        for node, rrset in batch:
            try:
                if what == "writing":
                    self.dns.upsert_a(rrset["name"], rrset["rrdatas"][0], rrset["ttl"])
                else:
                    self.dns.delete_a(rrset["name"])
            except ApiError as err:
                log.error("%s: %s the DNS record of %s failed: %s: %s", action, what, node, err.code, err.message)
                refused[node] = (err.code, err.message)
        return refused

    def delete(self, nodes: list[str], action: str) -> bool:
        """Delete the A records of `nodes`; missing ones are fine. False when Cloud DNS refused one.
        A deletion must name the record set as it is, so the zone is read first (its pages); a
        record deleted or changed since (notFound, conditionNotMet) sends its batch record by record."""
        self._keep_deadline()
        names = {node: record_name(self.config, node) for node in dict.fromkeys(nodes)}
        try:
            zone: dict[str, dict] | None = self.dns.list_a()
        except ApiError as err:
            log.warning("%s: listing the DNS zone failed (%s: %s): deleting one record at a time", action,
                        err.code, err.message)
            zone = None
        if zone is None:
            present = [(node, {"name": name, "rrdatas": []}) for node, name in names.items()]
        else:
            present = [(node, zone[name]) for node, name in names.items() if name in zone]
        ok, deleted = True, []
        for batch in change_batches(present, DNS_CHANGE_DELETIONS):
            if zone is None:
                failed = self._each(batch, action, "deleting")
            else:
                try:
                    self.dns.change(deletions=[r for _, r in batch])
                    failed = {}
                except ApiError as err:
                    failed = self._refused_batch(batch, err, action, "deleting")
            ok = ok and not failed
            deleted += [node for node, _ in batch if node not in failed]
        if deleted:
            log.info("%s: deleted the DNS records of %s", action, compress_hostlist(deleted))
        return ok


def transient(problem: ApiError) -> bool:
    """An error the client already retried until it gave up: throttling, a 5xx, a lost connection."""
    return retryable(problem) or problem.code in ("ConnectionError", "Timeout")


def node_records(config: dict, dns=None, compute=None) -> NodeRecords | None:
    """The cluster's zone of node names, or None when cluster.json names none (logged)."""
    if dns is None and (not config.get("dns_zone") or not config.get("dns_domain")):
        log.warning("cluster.json names no dns_zone/dns_domain: node names will not resolve")
        return None
    return NodeRecords(dns or Dns(config["project"], config["dns_zone"]), config, compute)


def launch_labels(config: dict, pool_name: str, request_id: str) -> dict[str, str]:
    """What every instance of one launch is labelled with at creation: the cluster, the pool and
    the launch's request id. The node needs no label: it is in the instance name, which is set
    at creation too (bulkInsert's per-instance properties take a name and a host name only:
    https://cloud.google.com/compute/docs/reference/rest/v1/instances/bulkInsert)."""
    labels = {config["cluster_label"]: config["cluster"], config.get("pool_label", DEFAULT_POOL_LABEL): pool_name,
              RESUME_ID_LABEL: request_id}
    version = core.pool_version(config, pool_name)
    if version:
        # The pool's version (cluster.json: the name of the instance template the launch uses),
        # so the reconcile loop's roll knows which nodes run an older template.
        labels[core.VERSION_TAG] = label_value(version)
    return labels


def template_name(link: str | None) -> str | None:
    """The name of the instance template an instance reports it was created from (its
    sourceInstanceTemplate link), as a version label would hold it: the version of an instance a
    resume program from before the version label created. None when it reports none."""
    name = (link or "").rstrip("/").rsplit("/", 1)[-1]
    return label_value(name) if name else None


def label_value(text: str) -> str:
    """`text` as a label value: at most 63 lower-case letters, digits, '-' and '_'
    (https://cloud.google.com/compute/docs/labeling-resources#requirements). An instance
    template's name already is one."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def bulk_insert_request(config: dict, pool_name: str, nodes: list[str], request_id: str) -> dict:
    """The bulkInsert body for `nodes` of one pool. The instance template holds everything about a
    node; the placement policy and the reservation are repeated as instance properties, as
    slurm-gcp does, so the request itself says where the nodes go. instanceProperties are merged
    over the template (JSON Merge Patch, as bulkInsert documents), so its labels add to the
    template's."""
    pool = config["pools"][pool_name]
    properties: dict = {"labels": launch_labels(config, pool_name, request_id)}
    if pool.get("placement_policy"):
        properties["resourcePolicies"] = [pool["placement_policy"]]
    if pool.get("reservation"):
        properties["reservationAffinity"] = {"consumeReservationType": "SPECIFIC_RESERVATION",
                                             "key": RESERVATION_KEY, "values": [pool["reservation"]]}
    return {
        "count": len(nodes),
        "minCount": len(nodes),                      # all or nothing
        "sourceInstanceTemplate": pool["instance_template"],
        "perInstanceProperties": {instance_name(config, n): {"name": instance_name(config, n)} for n in nodes},
        "instanceProperties": properties,
    }


def delete_instances(compute, names: list[str], wait: bool = False) -> list[str]:
    """Delete instances, DELETE_PARALLELISM at a time (a missing one is fine); with `wait`, until
    their names are free again. The names Compute Engine refused."""
    def delete_one(name: str) -> str | None:
        try:
            operation = compute.delete(name)
            problem = operation_error(compute.wait(operation)) if wait else None
            if problem:
                raise ApiError(0, *problem)
        except ApiError as err:
            if err.status == 404:
                return None
            log.error("delete %s failed: %s: %s", name, err.code, err.message)
            return name
        return None

    if len(names) <= 1:
        refused = [delete_one(name) for name in names]
    else:
        with ThreadPoolExecutor(max_workers=min(DELETE_PARALLELISM, len(names))) as pool:
            refused = list(pool.map(delete_one, names))
    return [name for name in refused if name]


def name_filter(names: list[str]) -> str:
    """An instances.list filter for exactly these instance names (`name eq "<RE2 regex>"`).
    Instance names hold only a-z, 0-9 and '-', none of them special in a regex."""
    bad = [n for n in names if not INSTANCE_NAME.fullmatch(n)]
    if bad:
        raise CloudError("BadInstanceName", f"not a Compute Engine instance name: {' '.join(bad)}")
    return f'name eq "({"|".join(names)})"'


def label_filter(**labels: str) -> str:
    """An instances.list filter selecting every label given (`labels.<key> = "<value>"`, one
    expression per parenthesis: https://cloud.google.com/compute/docs/reference/rest/v1/instances/list)."""
    return " ".join(f'(labels.{key} = "{value}")' for key, value in labels.items())


def timestamp(text: str) -> float:
    """Epoch seconds of an RFC 3339 creationTimestamp (2026-11-23T14:02:11.123-08:00); 0 when unreadable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return 0.0


def instance_events(instance: dict) -> tuple[str, ...]:
    """What Compute Engine says is about to happen to the instance, or has: upcoming host
    maintenance (the instance's resourceStatus.upcomingMaintenance:
    https://cloud.google.com/compute/docs/reference/rest/v1/instances), and the preemption of a
    Spot or preemptible instance."""
    events = []
    upcoming = (instance.get("resourceStatus") or {}).get("upcomingMaintenance")
    if upcoming:
        events.append(f"maintenance {upcoming.get('type', 'SCHEDULED')} {upcoming.get('maintenanceStatus', 'PENDING')}"
                      f" from {upcoming.get('windowStartTime', '?')} to {upcoming.get('windowEndTime', '?')}")
    scheduling = instance.get("scheduling") or {}
    spot = scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible")
    if spot and instance.get("status") in PREEMPTED_STATUSES:
        events.append(f"preempted: {scheduling.get('provisioningModel') or 'preemptible'} instance "
                      f"{instance['status']}")
    return tuple(events)


class Gce(core.Cloud):
    """Nodes as Compute Engine instances named <instance_prefix><node>, created by one bulkInsert
    per launch (chunk) and labelled at creation with the cluster, pool and launch; deleted. Nothing
    is deleted or adopted unless its cluster label is this cluster's."""

    launching, deleting, type_key = "creating", "deleting", "machine_type"

    def __init__(self, compute, config: dict, read_bootstrap_errors: bool = True):
        self.compute, self.config = compute, config
        self.prefix = config["instance_prefix"]
        # Guest attributes cost a call per instance: only the reconcile loop needs them.
        self.read_bootstrap_errors = read_bootstrap_errors
        # name -> the cluster label value of every instance this run has listed or read: what a
        # deletion checks first (a name, once this cluster's, stays so until this cluster deletes it).
        self.owners: dict[str, str] = {}

    @property
    def deadline(self) -> float | None:
        """When retried calls give up (time.monotonic()): core sets it from the resume budget."""
        return getattr(self.compute, "deadline", None)

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self.compute.deadline = value

    @property
    def chunk(self) -> int:
        return BULK_INSERT_LIMIT

    # --- what the cluster has --------------------------------------------------------------

    def owner(self, instance: dict) -> str:
        """The value of its cluster label ("" when it has none)."""
        return (instance.get("labels") or {}).get(self.config["cluster_label"], "")

    def ours(self, instance: dict) -> bool:
        return self.owner(instance) == self.config["cluster"]

    def seen(self, instances: list[dict]) -> list[dict]:
        """Remember whose each instance is (self.owners); the instances, as they were."""
        for instance in instances:
            if instance.get("name"):
                self.owners[instance["name"]] = self.owner(instance)
        return instances

    def not_ours_said(self, name: str, owner: str, action: str) -> str:
        """Why the instance `name`, labelled for cluster `owner`, is left alone; logged."""
        why = f"instance {name} carries {self.config['cluster_label']}={owner}, not {self.config['cluster']}: left alone"
        log.error("%s: %s", action, why)
        return why

    def cluster_instances(self) -> list[dict]:
        """Every instance labelled for this cluster (template and launch both label it), all pages,
        the label checked on each: the filter is the server's, and a listing that returns another
        cluster's instance (logged) must not make it this cluster's."""
        try:
            listed = self.seen(self.compute.list(label_filter(**{self.config["cluster_label"]: self.config["cluster"]})))
        except ApiError as err:
            raise CloudError(err.code, err.message) from err
        for instance in listed:
            if not self.ours(instance):
                self.not_ours_said(instance.get("name"), self.owner(instance), "list")
        return [i for i in listed if self.ours(i)]

    def node_of(self, instance: dict) -> str | None:
        """Its node: its name less the cluster's instance prefix, never a label (a user's tag can
        set any label: `aicluster.node: x` once named every VM of a cluster `x`). The rest must be
        a node name, <pool>-<n>, of the pool the instance is labelled with at creation: the head
        (<cluster>-head) and login VMs (<cluster>-login-<n>, no pool label) are named for no node.
        None: not a node's instance, never for these programs to end or adopt."""
        name = instance.get("name", "")
        pool = (instance.get("labels") or {}).get(self.config.get("pool_label", DEFAULT_POOL_LABEL))
        for prefix in (self.prefix, legacy_prefix(self.config)):
            node = name[len(prefix):] if name.startswith(prefix) else ""
            if node and pool and core.pool_of(node) == pool:
                return node
        return None

    def node_instances(self) -> list[core.Instance]:
        """This cluster's instances of its nodes: named for a node (node_of), and of this cluster,
        no role but compute and of a Slurm pool of it (core.not_ours, the one check every cloud
        makes). Anything else labelled for the cluster is not for these programs to touch."""
        kept = []
        for instance in self.cluster_instances():
            if not self.node_of(instance):
                continue                        # the head, a login VM: named for no node
            described = self.describe(instance)
            why = core.not_ours(described, self.config)
            if why:
                log.info("leaving %s alone: %s", described.id, why)
                continue
            kept.append(described)
        return kept

    # --- launch ----------------------------------------------------------------------------

    def launch(self, pool: str, nodes: list[str], request_id: str) -> dict[str, str]:
        """Create the nodes that have no live instance, all or none, with one bulkInsert carrying
        `request_id`. A node that already has a live instance keeps it (a duplicate resume is a
        no-op: its address is asserted again); an instance of the node that no longer runs
        (TERMINATED, STOPPING) is deleted first, as its name is needed."""
        names = {node: instance_name(self.config, node) for node in nodes}
        present = self.present(list(names.values()))
        # Another cluster's instance under one of these names (made by hand, by another tool): never
        # deleted to free the name, never adopted; the launch fails and its nodes go DOWN with why.
        foreign = [self.not_ours_said(name, self.owner(present[name]), "resume") for name in names.values()
                   if name in present and not self.ours(present[name])]
        if foreign:
            raise CloudError("NameTaken", "; ".join(foreign))
        live = [node for node, name in names.items() if STATES.get(present.get(name, {}).get("status"))]
        if live:
            log.info("resume: %s already have live instances: keeping them", compress_hostlist(live))
        stale = [name for node, name in names.items() if name in present and node not in live]
        if stale:
            log.info("resume: deleting %s, instances that no longer run, to free their names", " ".join(stale))
            if self.delete_refused(stale, wait=True):
                raise CloudError("NameInUse", f"could not delete {' '.join(stale)}, which hold the nodes' names")
        wanted = [node for node in nodes if node not in live]
        if wanted:
            self.create(pool, wanted, request_id)
        return names

    def present(self, names: list[str]) -> dict[str, dict]:
        """name -> instance, of those of `names` that exist: their names are taken."""
        try:
            if len(names) <= NAME_FILTER_MAX:
                listed = self.seen(self.compute.list(name_filter(names)))
            else:
                listed = self.cluster_instances()
        except ApiError as err:
            raise CloudError(err.code, err.message) from err
        wanted = set(names)
        return {i["name"]: i for i in listed if i.get("name") in wanted}

    def create(self, pool: str, nodes: list[str], request_id: str) -> None:
        """One bulkInsert; CloudError after deleting whatever this request left (found by its
        request id, never by name: an instance of the same name may be another launch's)."""
        try:
            request = bulk_insert_request(self.config, pool, nodes, request_id)
            failure = operation_error(self.compute.wait(self.compute.bulk_insert(request, request_id)))
        except ApiError as err:
            failure = (err.code, err.message)
        if not failure:
            return
        if failure[0] in ("Timeout", "ConnectionError"):
            log.error("resume: bulkInsert %s may still be creating instances (%s); any it creates later carry "
                      "%s=%s and no node: the reconcile loop deletes them", request_id, failure[0], RESUME_ID_LABEL,
                      request_id)
        self.clean_up(request_id)
        raise CloudError(*failure)

    def clean_up(self, request_id: str) -> None:
        """Delete the instances of a failed launch. If they cannot be listed they stay labelled
        with its request id and no node owns them: the reconcile loop deletes them."""
        try:
            leftovers = [i["name"] for i in self.seen(self.compute.list(label_filter(**{
                self.config["cluster_label"]: self.config["cluster"], RESUME_ID_LABEL: request_id})))]
        except ApiError as err:
            log.error("resume: cannot list the instances of failed launch %s (%s: %s); the reconcile loop "
                      "deletes any it left", request_id, err.code, err.message)
            return
        if leftovers:
            log.error("resume: deleting %s, left by the failed bulkInsert %s", " ".join(leftovers), request_id)
            self.delete_refused(leftovers)

    def locate(self, launched: dict[str, str]):
        """Each node's address, from one listing of the cluster (not a call per node); a GET only
        for an instance the listing does not show yet, whose cluster label is checked too: another
        cluster's address is never given to a node."""
        listed = {i["name"]: i for i in self.cluster_instances()}
        found, problems = {}, {}
        for node, name in launched.items():
            try:
                instance = listed.get(name) or self.seen([self.compute.get(name)])[0]
                if not self.ours(instance):
                    problems[node] = ("NameTaken", self.not_ours_said(name, self.owner(instance), "resume"))
                    continue
                found[node] = (instance["networkInterfaces"][0]["networkIP"], name)
            except (ApiError, KeyError, IndexError) as err:
                code, message = (err.code, err.message) if isinstance(err, ApiError) else ("BadInstance", repr(err))
                log.error("resume: %s (%s): %s: %s", node, name, code, message)
                problems[node] = (code, message)
        return found, problems

    # --- delete, find, list ------------------------------------------------------------------

    def delete(self, instances: list[str]) -> bool:
        return not self.delete_refused(instances)

    def delete_refused(self, instances: list[str], wait: bool = False) -> list[str]:
        """Delete those of `instances` (names) that carry this cluster's label; the names Compute
        Engine refused. A name this run has not listed is looked up first; one that is gone is
        done, one of another cluster is left alone (logged: there is nothing of this cluster's to
        delete); one that cannot be looked up is refused (kept for the reconcile loop)."""
        names = list(dict.fromkeys(instances))
        unknown, refused = [name for name in names if name not in self.owners], []
        if unknown:
            try:
                self.present(unknown)
            except CloudError as err:
                log.error("delete: cannot look up %s (%s: %s): not deleted", " ".join(unknown), err.code, err.message)
                refused = unknown
        mine = []
        for name in names:
            owner = self.owners.get(name)
            if name in refused or owner is None:        # not looked up; gone already
                continue
            if owner != self.config["cluster"]:
                self.not_ours_said(name, owner, "delete")
                continue
            mine.append(name)
        return refused + delete_instances(self.compute, mine, wait)

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        """node name -> this cluster's instances of it (by instance name, node_of)."""
        wanted = set(nodes)
        found: dict[str, list[str]] = {}
        for instance in self.node_instances():
            if instance.node in wanted:
                found.setdefault(instance.node, []).append(instance.id)
        return found

    def list_cluster(self) -> list[core.Instance]:
        """Every instance of the cluster's nodes (node_instances), with its maintenance and
        preemption events and, for young running instances, the reason its set-up failed. Not the
        head or login VMs, nor anything else labelled for the cluster but named for no node: the
        reconcile loop may act on all it is given."""
        instances = self.node_instances()
        errors = self.bootstrap_errors(instances) if self.read_bootstrap_errors else {}
        return [dataclasses.replace(i, bootstrap_error=errors[i.id]) if i.id in errors else i for i in instances]

    def describe(self, instance: dict) -> core.Instance:
        """The instance as the core sees it (its bootstrap error read separately)."""
        labels = instance.get("labels") or {}
        nics = instance.get("networkInterfaces") or [{}]
        return core.Instance(
            id=instance["name"], node=self.node_of(instance),
            pool=labels.get(self.config.get("pool_label", DEFAULT_POOL_LABEL)),
            state=STATES.get(instance.get("status"), "stopping"),
            launched_at=timestamp(instance.get("creationTimestamp", "")),
            resume_id=labels.get(RESUME_ID_LABEL), events=instance_events(instance),
            cluster=self.owner(instance), role=labels.get(ROLE_LABEL), address=nics[0].get("networkIP"),
            version=labels.get(core.VERSION_TAG) or template_name(instance.get("sourceInstanceTemplate")))

    def bootstrap_errors(self, instances: list[core.Instance]) -> dict[str, str]:
        """name -> the bootstrap error a running instance wrote (guest attribute
        aicluster/bootstrap-error), read only for instances younger than ResumeTimeout: an older
        one has registered with slurmctld or been given up by it. At most GUEST_ATTRIBUTE_READS
        calls, in random order so that every young instance is read within a few passes."""
        horizon = time.time() - float(self.config.get("resume_timeout_s") or DEFAULT_RESUME_TIMEOUT_S)
        young = [i.id for i in instances if i.state == "running" and i.launched_at >= horizon]
        if len(young) > GUEST_ATTRIBUTE_READS:
            log.info("list: reading the bootstrap errors of %d of %d young instances", GUEST_ATTRIBUTE_READS,
                     len(young))
            young = random.sample(young, GUEST_ATTRIBUTE_READS)
        errors = {}
        namespace, key = core.BOOTSTRAP_ERROR_ATTRIBUTE
        for name in young:
            try:
                value = self.compute.guest_attribute(name, namespace, key)
            except ApiError as err:
                log.warning("list: reading the bootstrap error of %s failed: %s: %s", name, err.code, err.message)
                continue
            if value:
                errors[name] = value
        return errors


# --- entry point ----------------------------------------------------------------------------


def resume(compute, config: dict, nodes: list[str], dns=None) -> int:
    """Create every pool's nodes; the number of nodes that failed and were set down. `dns`: an
    aicluster.node.gcp.Dns of the cluster's zone, or None."""
    return core.resume(Gce(compute, config, read_bootstrap_errors=False), config, nodes,
                       node_records(config, dns, compute) if dns else None)


def suspend(compute, config: dict, nodes: list[str], action: str = "suspend", dns=None) -> int:
    """Delete the instances of `nodes` and their DNS records; 0, or 1 when Compute Engine or
    Cloud DNS refused."""
    return core.suspend(Gce(compute, config, read_bootstrap_errors=False), nodes, action,
                        node_records(config, dns, compute) if dns else None)


def connect(config: dict, read_bootstrap_errors: bool = True):
    compute = Compute(config["project"], config["zone"])
    return Gce(compute, config, read_bootstrap_errors), node_records(config, compute=compute)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    parsed = core.parse_args(argv)
    reconciling = bool(parsed) and parsed[0] == core.RECONCILE
    return core.main(argv, "aicluster-gcp-power.py", CONFIG_KEYS,
                     lambda config: connect(config, read_bootstrap_errors=reconciling), reconcile.main)


if __name__ == "__main__":
    sys.exit(main())
