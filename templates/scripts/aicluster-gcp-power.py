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

It runs with the head node's system python3 only: hostlists come from aicluster_slurm.py, the
Compute API from aicluster_gcp.py, both beside this file. The cluster's facts come from
/etc/aicluster/cluster.json (AICLUSTER_CONFIG overrides), published by aicluster.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from aicluster_gcp import ApiError, Compute, Dns, operation_error  # noqa: E402
from aicluster_slurm import (NODE_RECORD_TTL_S, compress_hostlist, log, mark_down, pool_of,  # noqa: E402
                             run_action, scontrol, start)

DEFAULT_CONFIG = "/etc/aicluster/cluster.json"
DEFAULT_LOG = "/var/log/aicluster/power.log"
# Instances per bulkInsert (slurm-gcp's BULK_INSERT_LIMIT).
BULK_INSERT_LIMIT = 5000
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
CONFIG_KEYS = ("cluster", "project", "zone", "cluster_label", "node_label", "instance_prefix", "pools")


def instance_name(config: dict, node: str) -> str:
    return f"{config['instance_prefix']}{node}"


def record_name(config: dict, node: str) -> str:
    return f"{node}.{config['dns_domain'].rstrip('.')}."


def node_dns(config: dict):
    """The cluster's zone of node names, or None when cluster.json names none (logged)."""
    if not config.get("dns_zone") or not config.get("dns_domain"):
        log.warning("cluster.json names no dns_zone/dns_domain: node names will not resolve")
        return None
    return Dns(config["project"], config["dns_zone"])


def delete_records(dns, config: dict, nodes: list[str], action: str) -> bool:
    """Delete the A records of `nodes`; missing ones are fine. False when Cloud DNS refused one."""
    ok, deleted = True, []
    for node in dict.fromkeys(nodes):
        try:
            if dns.delete_a(record_name(config, node)):
                deleted.append(node)
        except ApiError as err:
            log.error("%s: deleting the DNS record of %s failed: %s: %s", action, node, err.code, err.message)
            ok = False
    if deleted:
        log.info("%s: deleted the DNS records of %s", action, compress_hostlist(deleted))
    return ok


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


def resume_chunk(compute, config: dict, pool_name: str, nodes: list[str], dns=None) -> list[str]:
    """Create one chunk of a pool's nodes; returns the nodes that failed (already set down)."""
    names = {node: instance_name(config, node) for node in nodes}
    try:
        operation = compute.wait(compute.bulk_insert(bulk_insert_request(config, pool_name, nodes)))
        failure = operation_error(operation)
    except ApiError as err:
        failure = (err.code, err.message)
    if failure:
        mark_down(nodes, *failure)
        leftovers = existing(compute, list(names.values()))
        if leftovers:
            log.error("resume: deleting %s, left by the failed bulkInsert", " ".join(leftovers))
            delete_instances(compute, leftovers)
        return list(nodes)

    failed, bad, written = [], [], []
    for node, name in names.items():
        try:
            instance = compute.get(name)
            address = instance["networkInterfaces"][0]["networkIP"]
            labels = {**instance.get("labels", {}), config["node_label"]: node}
            compute.set_labels(name, labels, instance.get("labelFingerprint", ""))
            # The name before the address: once slurmctld has the address, a job may start on it.
            if dns:
                dns.upsert_a(record_name(config, node), address, NODE_RECORD_TTL_S)
                written.append(node)
        except (ApiError, KeyError, IndexError) as err:
            code, message = (err.code, err.message) if isinstance(err, ApiError) else ("BadInstance", repr(err))
            log.error("resume: %s (%s): %s: %s", node, name, code, message)
            failed.append(node)
            bad.append(name)
            mark_down([node], code, message)
            continue
        if scontrol("update", f"nodename={node}", f"nodeaddr={address}", f"nodehostname={name}"):
            log.info("resume: %s -> %s %s", node, address, name)
        else:
            failed.append(node)
            bad.append(name)
            mark_down([node], "ScontrolFailed", f"could not set the address of {node} to {address}")
    if bad:
        log.error("resume: deleting %s, the instances of failed nodes", " ".join(bad))
        delete_instances(compute, bad)
        if dns and set(written) & set(failed):
            delete_records(dns, config, [n for n in written if n in failed], "resume")
    return failed


def resume(compute, config: dict, nodes: list[str], dns=None) -> int:
    """Create every pool's nodes; the number of nodes that failed and were set down."""
    by_pool: dict[str, list[str]] = {}
    for node in dict.fromkeys(nodes):
        by_pool.setdefault(pool_of(node) or "", []).append(node)
    failed = 0
    for pool_name, pool_nodes in by_pool.items():
        if pool_name not in config["pools"]:
            known = ", ".join(sorted(config["pools"])) or "none"
            what = f"no pool {pool_name!r} in cluster {config['cluster']}" if pool_name else "not a <pool>-<n> name"
            mark_down(pool_nodes, "UnknownPool", f"{what} (pools: {known})")
            failed += len(pool_nodes)
            continue
        log.info("resume: creating %s (%d x %s, pool %s)", compress_hostlist(pool_nodes), len(pool_nodes),
                 config["pools"][pool_name].get("machine_type"), pool_name)
        for i in range(0, len(pool_nodes), BULK_INSERT_LIMIT):
            chunk = pool_nodes[i:i + BULK_INSERT_LIMIT]
            try:
                failed += len(resume_chunk(compute, config, pool_name, chunk, dns))
            except Exception as err:  # never silent: a bug or a bad config entry still sets them down
                log.exception("resume: pool %s failed", pool_name)
                mark_down(chunk, type(err).__name__, str(err))
                failed += len(chunk)
    return failed


def find_instances(compute, config: dict, nodes: list[str]) -> dict[str, list[str]]:
    """node name -> this cluster's instances labelled with it. The listing is narrowed to the
    cluster's instance names; a node whose instance has no label yet (resume still running) is
    found by its instance name."""
    wanted = set(nodes)
    prefix = config["instance_prefix"]
    found: dict[str, list[str]] = {}
    for instance in compute.list(f'name eq "{prefix}.*"'):
        labels = instance.get("labels", {})
        if labels.get(config["cluster_label"]) != config["cluster"]:
            continue
        node = labels.get(config["node_label"])
        if node is None and instance["name"].startswith(prefix):
            node = instance["name"][len(prefix):]
        if node in wanted:
            found.setdefault(node, []).append(instance["name"])
    return found


def suspend(compute, config: dict, nodes: list[str], action: str = "suspend", dns=None) -> int:
    """Delete the instances of `nodes` and their DNS records; 0, or 1 when Compute Engine or
    Cloud DNS refused."""
    ok = True
    try:
        found = find_instances(compute, config, list(dict.fromkeys(nodes)))
    except ApiError as err:
        log.error("%s: finding the instances of %s failed: %s: %s", action, compress_hostlist(nodes), err.code,
                  err.message)
        found, ok = None, False
    if found is not None:
        missing = [n for n in dict.fromkeys(nodes) if n not in found]
        if missing:
            log.info("%s: no instance for %s", action, compress_hostlist(missing))
        for node, names in found.items():
            log.info("%s: deleting %s (%s)", action, node, " ".join(names))
        ok = delete_instances(compute, [n for names in found.values() for n in names])
    if dns:
        ok = delete_records(dns, config, nodes, action) and ok
    return 0 if ok else 1


def load_config(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError(f"{path}: missing {key!r}")
    return config


def main(argv: list[str] | None = None) -> int:
    started = start(list(sys.argv if argv is None else argv), "aicluster-gcp-power.py", load_config,
                    DEFAULT_CONFIG, DEFAULT_LOG)
    if isinstance(started, int):
        return started
    action, nodes, config = started
    compute = Compute(config["project"], config["zone"])
    dns = node_dns(config)
    return run_action(action, nodes, lambda: resume(compute, config, nodes, dns),
                      lambda: suspend(compute, config, nodes, action, dns))


if __name__ == "__main__":
    sys.exit(main())
