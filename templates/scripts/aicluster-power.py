#!/usr/bin/python3
"""Slurm power-saving programs for aicluster on AWS: resume, suspend and resume-fail.

slurmctld runs this file through three links, each with one argument, a Slurm hostlist:

    aicluster-resume      gpu-[3-5,9],infer-1   launch one instance per node (EC2 CreateFleet) and
                                                write its name into the cluster's DNS zone
    aicluster-suspend     gpu-[3-5]             terminate the nodes' instances, delete their names
    aicluster-resume-fail gpu-4                 the same termination; Slurm has set them down

or directly: aicluster-power.py resume|suspend|resume-fail HOSTLIST.

It runs with the head node's system python3 and python3-boto3 only. The cluster's facts come
from /etc/aicluster/cluster.json (AICLUSTER_CONFIG overrides), written by the head node.
Resume never fails silently: nodes it cannot launch are set DOWN with the EC2 error as the
reason, so their jobs requeue, and it exits non-zero after handling every pool.

Node names resolve through DNS (SlurmctldParameters=cloud_dns: Slurm hands srun no addresses):
resume UPSERTs an A record <node>.<dns_domain> -> private IP in the cluster's Route 53 private
hosted zone before it sets the node's address in Slurm, as ParallelCluster does; a node whose
record cannot be written goes DOWN like any other EC2 failure. Suspend and resume-fail delete the
records (a missing one is fine). Every node searches dns_domain, so `gpu-1` resolves.
"""
from __future__ import annotations

import os
import sys
import time

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError

# Resume and suspend, hostlists, scontrol, DOWN reasons, logging: the core every cloud shares
# (aicluster_slurm.py beside this file in /opt/aicluster/bin). This file holds the EC2 and Route 53 calls.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import aicluster_slurm as core  # noqa: E402
from aicluster_slurm import NODE_RECORD_TTL_S, CloudError, compress_hostlist, log  # noqa: E402
# Also here for the tests and for a reader at the head node's prompt: the core's hostlists and limits.
from aicluster_slurm import MAX_REASON, expand_hostlist, mark_down, pool_of  # noqa: E402,F401

CONFIG_KEYS = ("cluster", "region", "cluster_tag", "node_tag", "pool_tag", "pools")
LIVE_STATES = ("pending", "running", "stopping", "stopped")
IP_WAIT_S = 90              # DescribeInstances is eventually consistent after CreateFleet
FILTER_CHUNK = 199          # values per DescribeInstances filter
TERMINATE_CHUNK = 500
CHANGE_CHUNK = 500          # record changes per ChangeResourceRecordSets (Route 53 takes 1000)
# CreateFleet reports an override it skipped because another failed with this pair; it points
# at the real error instead of being one.
POINTER_ERROR = ("UnfulfillableCapacity", "Failed to fulfill capacity. Please review errors in the response.")
RETRIES = botocore.config.Config(retries={"max_attempts": 8, "mode": "standard"}, connect_timeout=10, read_timeout=60)


# --- EC2 ------------------------------------------------------------------------------------


def error_of(err: Exception) -> tuple[str, str]:
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        return error.get("Code") or "ClientError", error.get("Message") or str(err)
    return type(err).__name__, str(err)


def fleet_request(config: dict, pool_name: str, count: int) -> dict:
    """The CreateFleet request for `count` nodes of one pool: instant, all or nothing, from the
    pool's launch template (it carries the subnet on its interfaces, the placement group and the
    capacity reservation or block), so the only override is the instance type."""
    pool = config["pools"][pool_name]
    capacity = pool.get("capacity") or "on-demand"
    tags = [{"Key": config["cluster_tag"], "Value": config["cluster"]}, {"Key": config["pool_tag"], "Value": pool_name}]
    all_or_nothing = {"MinTargetCapacity": count, "SingleInstanceType": True, "SingleAvailabilityZone": True}
    request = {
        "Type": "instant",
        "LaunchTemplateConfigs": [{
            "LaunchTemplateSpecification": {"LaunchTemplateId": pool["launch_template_id"], "Version": "$Latest"},
            "Overrides": [{"InstanceType": pool["instance_type"]}],
        }],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": {"spot": "spot", "capacity-block": "capacity-block"}.get(capacity, "on-demand"),
        },
        # The fleet too: the head node may only create resources tagged for its cluster.
        "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "fleet")],
    }
    if capacity == "spot":
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized", **all_or_nothing}
    else:
        # On-demand pools use a matching open reservation first too; for a reservation or a
        # capacity block the launch template targets it.
        request["OnDemandOptions"] = {
            **all_or_nothing,
            "CapacityReservationOptions": {"UsageStrategy": "use-capacity-reservations-first"},
        }
    return request


def launch(ec2, config: dict, pool_name: str, count: int) -> list[str]:
    """CreateFleet; the ids of exactly `count` instances, or CloudError after terminating any
    instance a partial fleet left behind."""
    try:
        response = ec2.create_fleet(**fleet_request(config, pool_name, count))
    except (ClientError, BotoCoreError) as err:
        raise CloudError(*error_of(err)) from err
    ids = [iid for item in response.get("Instances") or [] for iid in item.get("InstanceIds") or []]
    errors = [(e.get("ErrorCode") or "UnknownError", e.get("ErrorMessage") or "") for e in response.get("Errors") or []]
    for code, message in errors:
        log.warning("resume: CreateFleet for pool %s reported %s: %s", pool_name, code, message)
    if len(ids) == count:
        return ids
    if ids:
        log.error("resume: CreateFleet for pool %s launched %d of %d instances; terminating %s",
                  pool_name, len(ids), count, " ".join(ids))
        terminate(ec2, ids)
    real = [e for e in errors if e != POINTER_ERROR] or errors
    if real:
        raise CloudError(*real[0])
    raise CloudError("UnfulfillableCapacity", f"CreateFleet launched {len(ids)} of {count} instances")


def terminate(ec2, ids: list[str]) -> bool:
    ok = True
    for i in range(0, len(ids), TERMINATE_CHUNK):
        try:
            ec2.terminate_instances(InstanceIds=ids[i:i + TERMINATE_CHUNK])
        except (ClientError, BotoCoreError) as err:
            log.error("terminate %s failed: %s: %s", " ".join(ids[i:i + TERMINATE_CHUNK]), *error_of(err))
            ok = False
    return ok


def addresses(ec2, ids: list[str]) -> dict[str, tuple[str, str]]:
    """instance id -> (private IP, short private DNS name), waiting out eventual consistency."""
    found: dict[str, tuple[str, str]] = {}
    if not ids:
        return found            # DescribeInstances with no ids would list every instance
    deadline, delay = time.monotonic() + IP_WAIT_S, 0.5
    while True:
        missing = [i for i in ids if i not in found]
        try:
            pages = ec2.get_paginator("describe_instances").paginate(InstanceIds=missing)
            for page in pages:
                for reservation in page.get("Reservations", []):
                    for instance in reservation.get("Instances", []):
                        ip = instance.get("PrivateIpAddress")
                        if ip:
                            host = (instance.get("PrivateDnsName") or "").split(".")[0] or ip
                            found[instance["InstanceId"]] = (ip, host)
        except (ClientError, BotoCoreError) as err:
            log.warning("resume: DescribeInstances %s: %s: %s", " ".join(missing), *error_of(err))
        if len(found) == len(ids) or time.monotonic() + delay > deadline:
            return found
        time.sleep(delay)
        delay = min(delay * 2, 10)


# --- Route 53: node names ------------------------------------------------------------------


class NodeRecords(core.NodeRecords):
    """The A records <node>.<domain> of the cluster's private hosted zone."""

    def __init__(self, route53, zone_id: str, domain: str, ttl: int = NODE_RECORD_TTL_S):
        self.route53, self.zone_id, self.domain, self.ttl = route53, zone_id, domain.rstrip("."), ttl

    def fqdn(self, node: str) -> str:
        return f"{node}.{self.domain}."

    def _change(self, changes: list[dict], what: str) -> None:
        self.route53.change_resource_record_sets(HostedZoneId=self.zone_id, ChangeBatch={
            "Comment": f"aicluster-power: {what}", "Changes": changes})

    def upsert(self, addresses: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Write node -> IP; returns node -> (code, message) for the records Route 53 refused."""
        failed: dict[str, tuple[str, str]] = {}
        items = list(addresses.items())
        for i in range(0, len(items), CHANGE_CHUNK):
            chunk = items[i:i + CHANGE_CHUNK]
            changes = [{"Action": "UPSERT", "ResourceRecordSet": {
                "Name": self.fqdn(node), "Type": "A", "TTL": self.ttl, "ResourceRecords": [{"Value": ip}]}}
                for node, ip in chunk]
            try:
                self._change(changes, f"resume {compress_hostlist(n for n, _ in chunk)}")
            except (ClientError, BotoCoreError) as err:
                code, message = error_of(err)
                log.error("resume: writing the DNS records of %s failed: %s: %s",
                          compress_hostlist(n for n, _ in chunk), code, message)
                failed.update({node: (code, message) for node, _ in chunk})
        return failed

    def current(self, nodes: list[str]) -> list[dict]:
        """The A records of `nodes` as they are now (a DELETE must repeat the current value)."""
        wanted = {self.fqdn(n).lower() for n in nodes}
        found = []
        for page in self.route53.get_paginator("list_resource_record_sets").paginate(HostedZoneId=self.zone_id):
            for record in page.get("ResourceRecordSets", []):
                name = record["Name"].lower()
                if record["Type"] == "A" and (name if name.endswith(".") else name + ".") in wanted:
                    found.append(record)
        return found

    def delete(self, nodes: list[str], action: str) -> bool:
        """Delete the A records of `nodes`; missing records are fine. False when Route 53 refused."""
        try:
            records = self.current(nodes)
        except (ClientError, BotoCoreError) as err:
            log.error("%s: listing the DNS records of %s failed: %s: %s", action, compress_hostlist(nodes),
                      *error_of(err))
            return False
        ok = True
        for i in range(0, len(records), CHANGE_CHUNK):
            chunk = records[i:i + CHANGE_CHUNK]
            try:
                self._change([{"Action": "DELETE", "ResourceRecordSet": r} for r in chunk], action)
                log.info("%s: deleted the DNS records %s", action, " ".join(r["Name"] for r in chunk))
            except (ClientError, BotoCoreError) as err:
                # One record changed or went since the listing: the batch fails as a whole, so
                # delete one by one, each from its current value.
                log.warning("%s: deleting %d DNS records failed (%s: %s); deleting one by one", action,
                            len(chunk), *error_of(err))
                ok = self._delete_each(chunk, action) and ok
        return ok

    def _delete_each(self, records: list[dict], action: str) -> bool:
        ok = True
        for record in records:
            try:
                now = self.route53.list_resource_record_sets(
                    HostedZoneId=self.zone_id, StartRecordName=record["Name"], StartRecordType="A", MaxItems="1")
                for current in now.get("ResourceRecordSets", [])[:1]:
                    if current["Type"] == "A" and current["Name"].lower() == record["Name"].lower():
                        self._change([{"Action": "DELETE", "ResourceRecordSet": current}], action)
            except (ClientError, BotoCoreError) as err:
                log.error("%s: deleting the DNS record %s failed: %s: %s", action, record["Name"], *error_of(err))
                ok = False
        return ok


def node_records(config: dict) -> NodeRecords | None:
    """The cluster's node-name records, or None when cluster.json names no zone (logged)."""
    if not config.get("hosted_zone_id") or not config.get("dns_domain"):
        log.warning("cluster.json names no hosted_zone_id/dns_domain: node names will not resolve")
        return None
    route53 = boto3.client("route53", region_name=config["region"], config=RETRIES)
    return NodeRecords(route53, config["hosted_zone_id"], config["dns_domain"])


# --- EC2 instances of Slurm nodes -----------------------------------------------------------


class Ec2(core.Cloud):
    """Nodes as EC2 instances: launched by CreateFleet from the pool's launch template, tagged with
    their node name, terminated."""

    launching, deleting = "launching", "terminating"

    def __init__(self, ec2, config: dict):
        self.ec2, self.config = ec2, config

    def launch(self, pool: str, nodes: list[str], request_id: str = "") -> dict[str, str]:
        return dict(zip(nodes, launch(self.ec2, self.config, pool, len(nodes))))

    def locate(self, launched: dict[str, str]):
        tagged, problems = {}, {}
        for node, iid in launched.items():
            try:
                self.ec2.create_tags(Resources=[iid], Tags=[{"Key": self.config["node_tag"], "Value": node}])
                tagged[node] = iid
                log.info("resume: %s is %s", node, iid)
            except (ClientError, BotoCoreError) as err:
                code, message = error_of(err)
                log.error("resume: tagging %s as %s failed: %s: %s", iid, node, code, message)
                problems[node] = (code, message)
        found = addresses(self.ec2, list(tagged.values()))
        for node, iid in tagged.items():
            if iid not in found:
                problems[node] = ("NoPrivateAddress", f"{iid} has no private IP after {IP_WAIT_S} s")
        return {node: found[iid] for node, iid in tagged.items() if iid in found}, problems

    def delete(self, instances: list[str]) -> bool:
        return terminate(self.ec2, instances)

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        try:
            return find_instances(self.ec2, self.config, nodes)
        except (ClientError, BotoCoreError) as err:
            raise CloudError(*error_of(err)) from err


def find_instances(ec2, config: dict, nodes: list[str]) -> dict[str, list[str]]:
    """node name -> ids of this cluster's live instances tagged with it."""
    found: dict[str, list[str]] = {}
    unique = list(dict.fromkeys(nodes))
    for i in range(0, len(unique), FILTER_CHUNK):
        filters = [
            {"Name": f"tag:{config['cluster_tag']}", "Values": [config["cluster"]]},
            {"Name": f"tag:{config['node_tag']}", "Values": unique[i:i + FILTER_CHUNK]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                    found.setdefault(tags[config["node_tag"]], []).append(instance["InstanceId"])
    return found


# --- entry point ----------------------------------------------------------------------------


def resume(ec2, config: dict, nodes: list[str], dns: NodeRecords | None = None) -> int:
    """Launch every pool's nodes; the number of nodes that failed and were set down."""
    return core.resume(Ec2(ec2, config), config, nodes, dns)


def suspend(ec2, config: dict, nodes: list[str], action: str = "suspend", dns: NodeRecords | None = None) -> int:
    """Terminate the instances of `nodes` and delete their DNS records; 0, or 1 when EC2 or
    Route 53 refused."""
    return core.suspend(Ec2(ec2, config), nodes, action, dns)


def connect(config: dict):
    return Ec2(boto3.client("ec2", region_name=config["region"], config=RETRIES), config), node_records(config)


def main(argv: list[str] | None = None) -> int:
    return core.main(list(sys.argv if argv is None else argv), "aicluster-power.py", CONFIG_KEYS, connect)


if __name__ == "__main__":
    sys.exit(main())
