#!/usr/bin/python3
"""Slurm power-saving programs for aicluster on GCP: resume, suspend and resume-fail.

slurmctld runs this file through three links, each with one argument, a Slurm hostlist:

    aicluster-resume      gpu-[3-5,9]   create one instance per node (Compute Engine bulkInsert)
                                        and write its name into the cluster's DNS zone
    aicluster-suspend     gpu-[3-5]     delete the nodes' instances, found by their node-name label,
                                        and their names
    aicluster-resume-fail gpu-4         the same deletion; Slurm has set them down

or directly: aicluster-gcp-power.py resume|suspend|resume-fail HOSTLIST.

Resume sends one zonal instances.bulkInsert per pool: all or nothing (minCount = count), from the
pool's instance template, into the pool's compact placement policy or its reservation, one instance
per node named <cluster>-<node>. It then labels each instance with its node name, writes the A
record <node>.<dns_domain> -> its address into the cluster's Cloud DNS private zone (node names
resolve through DNS: SlurmctldParameters=cloud_dns; every node searches dns_domain), and sets the
node's address in Slurm. Suspend and resume-fail delete the records (a missing one is fine). Any error (a stockout such as ZONE_RESOURCE_POOL_EXHAUSTED, a quota, a
bad reservation) sets the nodes DOWN with the error as the reason, so their jobs requeue, never
silently (slurm-gcp #3337 is the counter-example).

It runs with the head node's system python3 only: resume, suspend and hostlists come from
aicluster_slurm.py (the core both clouds share), the Google APIs from aicluster_gcp.py, both beside
this file; this file holds only the Compute Engine and Cloud DNS calls. The cluster's facts come from
/etc/aicluster/cluster.json (AICLUSTER_CONFIG overrides), published by aicluster.
"""
from __future__ import annotations

import os
import sys

# Resume and suspend, hostlists, scontrol, DOWN reasons, logging: the core every cloud shares
# (aicluster_slurm.py). This file holds the Compute Engine and Cloud DNS calls.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import aicluster_slurm as core  # noqa: E402
from aicluster_gcp import ApiError, Compute, Dns, operation_error  # noqa: E402
from aicluster_slurm import NODE_RECORD_TTL_S, CloudError, compress_hostlist, log  # noqa: E402

# Instances per bulkInsert (slurm-gcp's BULK_INSERT_LIMIT).
BULK_INSERT_LIMIT = 5000
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
CONFIG_KEYS = ("cluster", "project", "zone", "cluster_label", "node_label", "instance_prefix", "pools")


def instance_name(config: dict, node: str) -> str:
    return f"{config['instance_prefix']}{node}"


def record_name(config: dict, node: str) -> str:
    return f"{node}.{config['dns_domain'].rstrip('.')}."


class NodeRecords(core.NodeRecords):
    """The A records <node>.<dns_domain> of the cluster's Cloud DNS private zone, one call each."""

    def __init__(self, dns, config: dict):
        self.dns, self.config = dns, config

    def upsert(self, addresses: dict[str, str]) -> dict[str, tuple[str, str]]:
        refused = {}
        for node, address in addresses.items():
            try:
                self.dns.upsert_a(record_name(self.config, node), address, NODE_RECORD_TTL_S)
            except ApiError as err:
                log.error("resume: writing the DNS record of %s failed: %s: %s", node, err.code, err.message)
                refused[node] = (err.code, err.message)
        return refused

    def delete(self, nodes: list[str], action: str) -> bool:
        """Delete the A records of `nodes`; missing ones are fine. False when Cloud DNS refused one."""
        ok, deleted = True, []
        for node in dict.fromkeys(nodes):
            try:
                if self.dns.delete_a(record_name(self.config, node)):
                    deleted.append(node)
            except ApiError as err:
                log.error("%s: deleting the DNS record of %s failed: %s: %s", action, node, err.code, err.message)
                ok = False
        if deleted:
            log.info("%s: deleted the DNS records of %s", action, compress_hostlist(deleted))
        return ok


def node_records(config: dict, dns=None) -> NodeRecords | None:
    """The cluster's zone of node names, or None when cluster.json names none (logged)."""
    if dns is None and (not config.get("dns_zone") or not config.get("dns_domain")):
        log.warning("cluster.json names no dns_zone/dns_domain: node names will not resolve")
        return None
    return NodeRecords(dns or Dns(config["project"], config["dns_zone"]), config)


def bulk_insert_request(config: dict, pool_name: str, nodes: list[str]) -> dict:
    """The bulkInsert body for `nodes` of one pool. The instance template holds everything about a
    node; the placement policy and the reservation are repeated as instance properties, as
    slurm-gcp does, so the request itself says where the nodes go."""
    pool = config["pools"][pool_name]
    properties: dict = {}
    if pool.get("placement_policy"):
        properties["resourcePolicies"] = [pool["placement_policy"]]
    if pool.get("reservation"):
        properties["reservationAffinity"] = {"consumeReservationType": "SPECIFIC_RESERVATION",
                                             "key": RESERVATION_KEY, "values": [pool["reservation"]]}
    body = {
        "count": len(nodes),
        "minCount": len(nodes),                      # all or nothing
        "sourceInstanceTemplate": pool["instance_template"],
        "perInstanceProperties": {instance_name(config, n): {"name": instance_name(config, n)} for n in nodes},
    }
    if properties:
        body["instanceProperties"] = properties
    return body


def delete_instances(compute, names: list[str]) -> bool:
    ok = True
    for name in names:
        try:
            compute.delete(name)
        except ApiError as err:
            if err.status == 404:
                continue
            log.error("delete %s failed: %s: %s", name, err.code, err.message)
            ok = False
    return ok


def existing(compute, names: list[str]) -> list[str]:
    """Those of `names` that exist (a failed bulkInsert should leave none; this makes sure)."""
    found = []
    for name in names:
        try:
            compute.get(name)
            found.append(name)
        except ApiError as err:
            if err.status != 404:
                log.warning("resume: looking up %s: %s: %s", name, err.code, err.message)
    return found


class Gce(core.Cloud):
    """Nodes as Compute Engine instances named <cluster>-<node>: created by one bulkInsert per pool
    (chunk), labelled with their node name, deleted."""

    launching, deleting, type_key = "creating", "deleting", "machine_type"

    def __init__(self, compute, config: dict):
        self.compute, self.config = compute, config

    @property
    def chunk(self) -> int:
        return BULK_INSERT_LIMIT

    def launch(self, pool: str, nodes: list[str], request_id: str = "") -> dict[str, str]:
        names = {node: instance_name(self.config, node) for node in nodes}
        try:
            operation = self.compute.wait(self.compute.bulk_insert(bulk_insert_request(self.config, pool, nodes)))
            failure = operation_error(operation)
        except ApiError as err:
            failure = (err.code, err.message)
        if not failure:
            return names
        leftovers = existing(self.compute, list(names.values()))
        if leftovers:
            log.error("resume: deleting %s, left by the failed bulkInsert", " ".join(leftovers))
            delete_instances(self.compute, leftovers)
        raise CloudError(*failure)

    def locate(self, launched: dict[str, str]):
        found, problems = {}, {}
        for node, name in launched.items():
            try:
                instance = self.compute.get(name)
                address = instance["networkInterfaces"][0]["networkIP"]
                labels = {**instance.get("labels", {}), self.config["node_label"]: node}
                self.compute.set_labels(name, labels, instance.get("labelFingerprint", ""))
                found[node] = (address, name)
            except (ApiError, KeyError, IndexError) as err:
                code, message = (err.code, err.message) if isinstance(err, ApiError) else ("BadInstance", repr(err))
                log.error("resume: %s (%s): %s: %s", node, name, code, message)
                problems[node] = (code, message)
        return found, problems

    def delete(self, instances: list[str]) -> bool:
        return delete_instances(self.compute, instances)

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        """node name -> this cluster's instances labelled with it. The listing is narrowed to the
        cluster's instance names; a node whose instance has no label yet (resume still running) is
        found by its instance name."""
        wanted = set(nodes)
        prefix = self.config["instance_prefix"]
        found: dict[str, list[str]] = {}
        try:
            instances = self.compute.list(f'name eq "{prefix}.*"')
        except ApiError as err:
            raise CloudError(err.code, err.message) from err
        for instance in instances:
            labels = instance.get("labels", {})
            if labels.get(self.config["cluster_label"]) != self.config["cluster"]:
                continue
            node = labels.get(self.config["node_label"])
            if node is None and instance["name"].startswith(prefix):
                node = instance["name"][len(prefix):]
            if node in wanted:
                found.setdefault(node, []).append(instance["name"])
        return found


# --- entry point ----------------------------------------------------------------------------


def resume(compute, config: dict, nodes: list[str], dns=None) -> int:
    """Create every pool's nodes; the number of nodes that failed and were set down. `dns`: an
    aicluster_gcp.Dns of the cluster's zone, or None."""
    return core.resume(Gce(compute, config), config, nodes, node_records(config, dns) if dns else None)


def suspend(compute, config: dict, nodes: list[str], action: str = "suspend", dns=None) -> int:
    """Delete the instances of `nodes` and their DNS records; 0, or 1 when Compute Engine or
    Cloud DNS refused."""
    return core.suspend(Gce(compute, config), nodes, action, node_records(config, dns) if dns else None)


def connect(config: dict):
    return Gce(Compute(config["project"], config["zone"]), config), node_records(config)


def main(argv: list[str] | None = None) -> int:
    return core.main(list(sys.argv if argv is None else argv), "aicluster-gcp-power.py", CONFIG_KEYS, connect)


if __name__ == "__main__":
    sys.exit(main())
