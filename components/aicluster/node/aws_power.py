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
reason, so their jobs requeue, and it exits non-zero after handling every job.

No instance is ever left unseen: CreateFleet tags every instance at launch with the cluster, the
pool and the resume request (aicluster-resume-id, also its ClientToken, so a retried CreateFleet
returns the same fleet), so an instance whose node-name tag never arrives is still listed
(Ec2.list_cluster) and ended. Nothing is terminated or adopted unless it carries this cluster's
tag value (checked on each instance, never left to a listing's filter), no aicluster-role but
compute, and a pool's or resume-id tag (aicluster.node.slurm.not_ours): the head and login nodes carry
the cluster tag too. A refused TerminateInstances batch is retried one instance at a time, so an
instance EC2 may not end (the head's termination protection) never keeps the others running.
A node that already has a live instance is not launched again.
Launches go per job of SLURM_RESUME_FILE, all or nothing per job, several at once; every EC2
call is retried with jittered backoff under throttling until a deadline taken from ResumeTimeout.
A suspend whose termination EC2 refuses is written to /var/lib/aicluster/pending-suspend.json for
the reconcile loop and keeps the nodes' DNS records; its exit code stays 1.

Node names resolve through DNS (SlurmctldParameters=cloud_dns: Slurm hands srun no addresses):
resume UPSERTs an A record <node>.<dns_domain> -> private IP in the cluster's Route 53 private
hosted zone before it sets the node's address in Slurm, as ParallelCluster does; a node whose
record cannot be written goes DOWN like any other EC2 failure. Suspend and resume-fail delete the
records (a missing one is fine). Every node searches dns_domain, so `gpu-1` resolves.
"""
from __future__ import annotations

import dataclasses
import sys
import time
import uuid

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError

# Resume and suspend, hostlists, scontrol, DOWN reasons, logging: the core every cloud shares
# (aicluster.node.slurm). This file holds the EC2 and Route 53 calls.
from aicluster.node import reconcile
from aicluster.node import slurm as core
from aicluster.node.slurm import NODE_RECORD_TTL_S, CloudError, compress_hostlist, log
# Also here for the tests and for a reader at the head node's prompt: the core's hostlists and limits.
from aicluster.node.slurm import MAX_REASON, expand_hostlist, mark_down, pool_of  # noqa: F401

CONFIG_KEYS = ("cluster", "region", "cluster_tag", "node_tag", "pool_tag", "pools")
LIVE_STATES = ("pending", "running", "stopping", "stopped")
RESUME_ID_TAG = "aicluster-resume-id"   # the resume request (ClientToken) that launched an instance
ROLE_TAG = "aicluster-role"             # compute on the pools' instances (their launch templates); head, login
# What EC2 itself tags an instance launched from a launch template with: the version it came from
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-launch-templates.html, "aws:ec2launchtemplate:version").
# Read when an instance lacks core.VERSION_TAG (launched by a resume program from before it).
EC2_TEMPLATE_VERSION_TAG = "aws:ec2launchtemplate:version"
IP_WAIT_S = 90              # DescribeInstances is eventually consistent after CreateFleet
# DescribeInstances takes at most 200 values per filter
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html); one spare.
FILTER_CHUNK = 199
PAGE_SIZE = 1000            # DescribeInstances MaxResults: 5 to 1000 (same page)
# TerminateInstances: "Up to 1000 instance IDs. We recommend breaking up this request into smaller
# batches." (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_TerminateInstances.html)
TERMINATE_CHUNK = 500
# DescribeInstanceStatus: at most 100 explicit instance ids
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceStatus.html).
STATUS_CHUNK = 100
# Instances per CreateFleet: the EC2 Fleet quota is a target capacity of 10,000 per fleet
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/fleet-quotas.html); an instant fleet is one
# synchronous call, so a launch of more nodes goes out as several fleets of at most 1,000, all or
# nothing together for one job (aicluster.node.slurm.launch_group).
FLEET_CHUNK = 1000
# CreateFleet ClientToken: "Up to 64 ASCII characters"
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html,
# https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html); a UUID has 36.
CLIENT_TOKEN_MAX = 64
# Node-name tags: CreateTags takes up to 1000 resources but one set of tags for all of them
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html), and every instance
# has its own node name: one call per node, this many at once, each retried with backoff.
TAG_PARALLELISM = 8
CHANGE_CHUNK = 500          # record changes per ChangeResourceRecordSets (Route 53 takes 1000)
# Scheduled events the head sees (DescribeInstanceStatus event.code):
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instances-status-check_sched.html
EVENT_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop")
SPOT_NOTICE = "marked-for-termination"  # DescribeSpotInstanceRequests status code of a 2-minute notice
SPOT_STATE_REASONS = ("Server.SpotInstanceTermination", "Server.SpotInstanceShutdown")
# CreateFleet reports an override it skipped because another failed with this pair; it points
# at the real error instead of being one.
POINTER_ERROR = ("UnfulfillableCapacity", "Failed to fulfill capacity. Please review errors in the response.")
RETRIES = botocore.config.Config(retries={"max_attempts": 8, "mode": "standard"}, connect_timeout=10, read_timeout=60)
# EC2 calls are retried by this program (core.with_backoff), against the resume's deadline, not by
# botocore: its own retries would multiply ours and ignore the deadline.
EC2_CALLS = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10,
                                   read_timeout=60, max_pool_connections=TAG_PARALLELISM + 2)
# Errors that may pass: throttling and the service's own trouble
# (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html,
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
TRANSIENT_CODES = {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
                   "TooManyRequestsException", "ServiceUnavailable", "Unavailable", "InternalError",
                   "InternalFailure", "ServerInternal", "RequestTimeout"}


# --- EC2 ------------------------------------------------------------------------------------


def error_of(err: Exception) -> tuple[str, str]:
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        return error.get("Code") or "ClientError", error.get("Message") or str(err)
    return type(err).__name__, str(err)


def transient(err: Exception) -> bool:
    """Worth retrying: throttling, a 5xx, a connection lost or timed out. Every call retried is
    idempotent: reads, tags, terminations, and CreateFleet under its ClientToken."""
    if isinstance(err, ClientError):
        # Not every 5xx: EC2 answers InsufficientInstanceCapacity with a 500, and capacity does not
        # come back within a backoff; a gateway's 502/503/504 does pass.
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error_of(err)[0] in TRANSIENT_CODES or status in (502, 503, 504)
    return isinstance(err, (botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError))


def fleet_request(config: dict, pool_name: str, count: int, request_id: str | None = None) -> dict:
    """The CreateFleet request for `count` nodes of one pool: instant, all or nothing, from the
    pool's launch template (it carries the subnet on its interfaces, the placement group and the
    capacity reservation or block), so the only override is the instance type. With `request_id`:
    its ClientToken (a retry returns the same fleet instead of launching another) and a tag on
    every instance, so an instance whose node-name tag never arrived is still found."""
    pool = config["pools"][pool_name]
    capacity = pool.get("capacity") or "on-demand"
    # The pool's version in cluster.json (the launch template version `pulumi up` made), exactly:
    # "$Latest" would launch whatever the template holds at the moment of the call, even a version
    # the head's cluster.json does not know yet. Only a cluster.json from before versions has none.
    version = core.pool_version(config, pool_name)
    tags = [{"Key": config["cluster_tag"], "Value": config["cluster"]}, {"Key": config["pool_tag"], "Value": pool_name}]
    if request_id:
        tags.append({"Key": RESUME_ID_TAG, "Value": request_id})
    if version:
        tags.append({"Key": core.VERSION_TAG, "Value": version})
    all_or_nothing = {"MinTargetCapacity": count, "SingleInstanceType": True, "SingleAvailabilityZone": True}
    request = {
        "Type": "instant",
        "LaunchTemplateConfigs": [{
            "LaunchTemplateSpecification": {"LaunchTemplateId": pool["launch_template_id"],
                                            "Version": version or "$Latest"},
            "Overrides": [{"InstanceType": pool["instance_type"]}],
        }],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": {"spot": "spot", "capacity-block": "capacity-block"}.get(capacity, "on-demand"),
        },
        # The fleet too: the head node may only create resources tagged for its cluster.
        "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "fleet")],
    }
    if request_id:
        if len(request_id) > CLIENT_TOKEN_MAX or not request_id.isascii():
            raise ValueError(f"ClientToken {request_id!r}: at most {CLIENT_TOKEN_MAX} ASCII characters")
        request["ClientToken"] = request_id
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


def tags_of(instance: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


def epoch(value) -> float:
    """LaunchTime (a datetime from boto3) in epoch seconds; 0 when absent."""
    if isinstance(value, (int, float)):
        return float(value)
    return value.timestamp() if hasattr(value, "timestamp") else 0.0


class Ec2(core.Cloud):
    """Nodes as EC2 instances: launched by CreateFleet from the pool's launch template, tagged at
    launch with the cluster, the pool and the resume request, then with their node name;
    terminated. Every call is retried under throttling until the run's deadline."""

    launching, deleting = "launching", "terminating"
    chunk = FLEET_CHUNK

    def __init__(self, ec2, config: dict):
        self.ec2, self.config = ec2, config

    # -- calls -------------------------------------------------------------------------------

    def call(self, operation: str, **kwargs):
        """One EC2 call, retried (core.with_backoff); (response, attempts), or CloudError."""
        try:
            return core.with_backoff(lambda: getattr(self.ec2, operation)(**kwargs), transient, self.deadline,
                                     operation)
        except (ClientError, BotoCoreError) as err:
            raise CloudError(*error_of(err)) from err

    def describe(self, filters: list[dict]) -> list[dict]:
        """Every instance DescribeInstances gives for `filters`, page by page, each page retried."""
        found, token = [], None
        while True:
            page, _ = self.call("describe_instances", Filters=filters, MaxResults=PAGE_SIZE,
                                **({"NextToken": token} if token else {}))
            found += [i for r in page.get("Reservations", []) for i in r.get("Instances", [])]
            token = page.get("NextToken")
            if not token:
                return found

    def cluster_filter(self) -> dict:
        return {"Name": f"tag:{self.config['cluster_tag']}", "Values": [self.config["cluster"]]}

    def instance_of(self, instance: dict) -> core.Instance:
        """DescribeInstances' instance as the core sees it (events listed separately)."""
        tags = tags_of(instance)
        return core.Instance(
            id=instance["InstanceId"], node=tags.get(self.config["node_tag"]), pool=tags.get(self.config["pool_tag"]),
            state=instance.get("State", {}).get("Name", "unknown"), launched_at=epoch(instance.get("LaunchTime")),
            resume_id=tags.get(RESUME_ID_TAG), bootstrap_error=tags.get(core.BOOTSTRAP_ERROR_TAG),
            cluster=tags.get(self.config["cluster_tag"], ""), role=tags.get(ROLE_TAG),
            address=instance.get("PrivateIpAddress"),
            version=tags.get(core.VERSION_TAG) or tags.get(EC2_TEMPLATE_VERSION_TAG))

    def ours(self, instances: list[dict], what: str) -> list[dict]:
        """Those of `instances` the core may end (core.not_ours: this cluster's tag value, checked
        on each instance rather than trusted to the filter; no role but compute; a pool's)."""
        kept = []
        for instance in instances:
            why = core.not_ours(self.instance_of(instance), self.config)
            if why:
                log.error("%s: leaving %s alone: %s", what, instance["InstanceId"], why)
            else:
                kept.append(instance)
        return kept

    def live_filter(self) -> dict:
        return {"Name": "instance-state-name", "Values": list(LIVE_STATES)}

    # -- launch ------------------------------------------------------------------------------

    def launch(self, pool: str, nodes: list[str], request_id: str = "") -> dict[str, str]:
        """CreateFleet for `nodes`: node -> instance, or CloudError after terminating everything
        this request launched (found by its resume-id tag too, should a response have been lost)."""
        request_id = request_id or str(uuid.uuid4())
        count = len(nodes)
        try:
            response, attempts = self.call("create_fleet", **fleet_request(self.config, pool, count, request_id))
        except CloudError as err:
            if err.__cause__ is not None and transient(err.__cause__):
                # A lost or throttled response may still have launched: nothing of it may stay.
                self.sweep(request_id, keep=())
            raise
        ids = [iid for item in response.get("Instances") or [] for iid in item.get("InstanceIds") or []]
        errors = [(e.get("ErrorCode") or "UnknownError", e.get("ErrorMessage") or "")
                  for e in response.get("Errors") or []]
        for code, message in errors:
            log.warning("resume: CreateFleet for pool %s reported %s: %s", pool, code, message)
        if len(ids) == count:
            if attempts > 1:        # an earlier attempt may have launched before its response was lost
                self.sweep(request_id, keep=ids)
            return dict(zip(nodes, ids))
        if ids:
            log.error("resume: CreateFleet for pool %s launched %d of %d instances; terminating %s",
                      pool, len(ids), count, " ".join(ids))
            if self.delete_refused(ids):
                core.record_pending_suspend(dict(zip(nodes, [[i] for i in ids])), "resume-fail",
                                            f"partial fleet {request_id}: terminate refused")
        self.sweep(request_id, keep=ids)
        real = [e for e in errors if e != POINTER_ERROR] or errors
        if real:
            raise CloudError(*real[0])
        raise CloudError("UnfulfillableCapacity", f"CreateFleet launched {len(ids)} of {count} instances")

    def sweep(self, request_id: str, keep) -> None:
        """Terminate the live instances tagged with `request_id` but not in `keep`: what a lost
        CreateFleet response launched. What cannot be listed or terminated stays findable by its
        cluster and resume-id tags, and the reconcile loop ends it (it belongs to no node)."""
        try:
            strays = [i["InstanceId"] for i in self.ours(self.describe([
                self.cluster_filter(), {"Name": f"tag:{RESUME_ID_TAG}", "Values": [request_id]}, self.live_filter()]),
                "resume") if i["InstanceId"] not in set(keep)]
        except CloudError as err:
            log.error("resume: cannot look for instances of request %s: %s: %s; the reconcile loop will",
                      request_id, err.code, err.message)
            return
        if strays:
            log.error("resume: terminating %s, launched by request %s but never handed back", " ".join(strays),
                      request_id)
            refused = self.delete_refused(strays)
            if refused:
                log.error("resume: terminating %s refused; the reconcile loop ends them (no node owns them)",
                          " ".join(refused))

    # -- naming --------------------------------------------------------------------------------

    def tag_node(self, item: tuple[str, str]) -> tuple[str, tuple[str, str] | None]:
        node, iid = item
        try:
            self.call("create_tags", Resources=[iid], Tags=[{"Key": self.config["node_tag"], "Value": node}])
            log.info("resume: %s is %s", node, iid)
            return node, None
        except CloudError as err:
            log.error("resume: tagging %s as %s failed: %s: %s", iid, node, err.code, err.message)
            return node, (err.code, err.message)

    def locate(self, launched: dict[str, str]):
        """Tag every instance with its node name (TAG_PARALLELISM at once: each instance has its own
        value, so one CreateTags each), then read their addresses."""
        problems = {node: problem for node, problem in
                    core.bounded_map(self.tag_node, list(launched.items()), TAG_PARALLELISM) if problem}
        tagged = {node: iid for node, iid in launched.items() if node not in problems}
        found = self.addresses(list(tagged.values()))
        for node, iid in tagged.items():
            if iid not in found:
                problems[node] = ("NoPrivateAddress", f"{iid} has no private IP after {IP_WAIT_S} s")
        return {node: found[iid] for node, iid in tagged.items() if iid in found}, problems

    def addresses(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """instance id -> (private IP, short private DNS name), waiting out eventual consistency
        (at most IP_WAIT_S, never past the deadline)."""
        found: dict[str, tuple[str, str]] = {}
        wait_until = time.monotonic() + IP_WAIT_S
        if self.deadline is not None:
            wait_until = min(wait_until, self.deadline)
        delay = 0.5
        while ids:
            missing = [i for i in ids if i not in found]
            for i in range(0, len(missing), FILTER_CHUNK):
                try:
                    instances = self.describe([{"Name": "instance-id", "Values": missing[i:i + FILTER_CHUNK]}])
                except CloudError as err:
                    log.warning("resume: DescribeInstances: %s: %s", err.code, err.message)
                    continue
                for instance in instances:
                    ip = instance.get("PrivateIpAddress")
                    if ip:
                        host = (instance.get("PrivateDnsName") or "").split(".")[0] or ip
                        found[instance["InstanceId"]] = (ip, host)
            if len(found) == len(ids) or time.monotonic() + delay > wait_until:
                break
            time.sleep(delay)
            delay = min(delay * 2, 10)
        return found

    # -- delete, find, list ----------------------------------------------------------------------

    def delete(self, instances: list[str]) -> bool:
        return not self.delete_refused(instances)

    def delete_refused(self, instances: list[str]) -> list[str]:
        """TerminateInstances in batches, each retried; the ids EC2 refused. A batch refused for
        good (not throttled past the deadline) is tried again an instance at a time: EC2 refuses
        a whole batch for one instance it may not end (termination protection: OperationNotPermitted;
        an IAM condition: UnauthorizedOperation) or cannot see yet (InvalidInstanceID.NotFound just
        after launch), and that one must never keep the others running."""
        refused: list[str] = []
        for i in range(0, len(instances), TERMINATE_CHUNK):
            batch = instances[i:i + TERMINATE_CHUNK]
            try:
                self.call("terminate_instances", InstanceIds=batch)
                continue
            except CloudError as err:
                log.error("terminate %s failed: %s: %s", " ".join(batch), err.code, err.message)
                if len(batch) == 1 or (err.__cause__ is not None and transient(err.__cause__)):
                    refused += batch
                    continue
            log.warning("terminating %d instances one at a time, so the one refused keeps no other running",
                        len(batch))
            refused += [iid for iid in batch if self.delete_refused([iid])]
        return refused

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        """node name -> ids of this cluster's live instances tagged with it."""
        found: dict[str, list[str]] = {}
        unique = list(dict.fromkeys(nodes))
        for i in range(0, len(unique), FILTER_CHUNK):
            filters = [self.cluster_filter(), {"Name": f"tag:{self.config['node_tag']}",
                                               "Values": unique[i:i + FILTER_CHUNK]}, self.live_filter()]
            for instance in self.ours(self.describe(filters), "find"):
                found.setdefault(tags_of(instance)[self.config["node_tag"]], []).append(instance["InstanceId"])
        return found

    def list_cluster(self) -> list[core.Instance]:
        """Every live instance with the cluster tag, named for a node or not (head and login nodes
        too: the core leaves them alone, core.not_ours), with its cluster, role, pool and private
        address, scheduled events and spot interruption notices."""
        raw = self.describe([self.cluster_filter(), self.live_filter()])
        events = self.events([i["InstanceId"] for i in raw], [i for i in raw if i.get("InstanceLifecycle") == "spot"])
        return [dataclasses.replace(self.instance_of(instance), events=tuple(events.get(instance["InstanceId"], ())))
                for instance in raw]

    def events(self, ids: list[str], spot: list[dict]) -> dict[str, list[str]]:
        """instance id -> its notices: scheduled events (DescribeInstanceStatus) and spot
        interruptions (DescribeSpotInstanceRequests marked-for-termination, or a spot instance
        stopping or shutting down for that reason). A failed lookup is logged: the next pass asks
        again; the instances themselves are listed all the same."""
        notices: dict[str, list[str]] = {}
        for i in range(0, len(ids), STATUS_CHUNK):
            try:
                page, _ = self.call("describe_instance_status", InstanceIds=ids[i:i + STATUS_CHUNK],
                                    IncludeAllInstances=True)
            except CloudError as err:
                log.warning("DescribeInstanceStatus: %s: %s; scheduled events unknown this pass", err.code, err.message)
                break
            for status in page.get("InstanceStatuses", []):
                for event in status.get("Events") or []:
                    code = event.get("Code", "")
                    if code in EVENT_CODES and not (event.get("Description") or "").startswith("[Completed]"):
                        when = event.get("NotBefore")
                        notices.setdefault(status["InstanceId"], []).append(
                            f"{code}: {event.get('Description', '')}" + (f" (not before {when})" if when else ""))
        for instance in spot:
            reason = (instance.get("StateReason") or {}).get("Code", "")
            if reason in SPOT_STATE_REASONS:
                notices.setdefault(instance["InstanceId"], []).append(f"spot-interruption: {reason}")
        request_ids = [i["SpotInstanceRequestId"] for i in spot if i.get("SpotInstanceRequestId")]
        for i in range(0, len(request_ids), FILTER_CHUNK):
            try:
                page, _ = self.call("describe_spot_instance_requests", Filters=[
                    {"Name": "spot-instance-request-id", "Values": request_ids[i:i + FILTER_CHUNK]},
                    {"Name": "status-code", "Values": [SPOT_NOTICE]}])
            except CloudError as err:
                log.warning("DescribeSpotInstanceRequests: %s: %s; interruptions unknown this pass", err.code,
                            err.message)
                break
            for request in page.get("SpotInstanceRequests", []):
                if request.get("InstanceId") and (request.get("Status") or {}).get("Code") == SPOT_NOTICE:
                    notices.setdefault(request["InstanceId"], []).append(f"spot-interruption: {SPOT_NOTICE}")
        return notices


# --- entry point ----------------------------------------------------------------------------


def resume(ec2, config: dict, nodes: list[str], dns: NodeRecords | None = None) -> int:
    """Launch every pool's nodes; the number of nodes that failed and were set down."""
    return core.resume(Ec2(ec2, config), config, nodes, dns)


def suspend(ec2, config: dict, nodes: list[str], action: str = "suspend", dns: NodeRecords | None = None) -> int:
    """Terminate the instances of `nodes` and delete their DNS records; 0, or 1 when EC2 or
    Route 53 refused."""
    return core.suspend(Ec2(ec2, config), nodes, action, dns)


def connect(config: dict):
    return Ec2(boto3.client("ec2", region_name=config["region"], config=EC2_CALLS), config), node_records(config)


def main(argv: list[str] | None = None) -> int:
    return core.main(list(sys.argv if argv is None else argv), "aicluster-power.py", CONFIG_KEYS, connect,
                     reconcile.main)


if __name__ == "__main__":
    sys.exit(main())
