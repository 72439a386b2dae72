"""What a Slurm VM runs to be watched: the exporters of the one list (catalog/observability.yaml,
the same series the Kubernetes DaemonSets serve) and an agent that ships them and the node's logs
to the cluster's managed backends (aws/observability.py, gcp/observability.py).

One program, `aicluster-monitoring --cloud aws|gcp --role head|compute|login`, rendered here from the
catalog's pins (templates/scripts/aicluster-monitoring.sh.j2). It is the same for every cluster:
what differs per node (cluster, pool, node name, the AMP workspace's write URL, the region) is
written into the configurations below as TOKENS, which the program replaces with the values of the
node's env file when it installs them. Compute nodes run it from their bootstrap after slurmd has
started (a monitoring failure never keeps a node out of Slurm), login nodes at the end of theirs;
the head runs it when aicluster-sync installs the published monitoring env file
(slurm_files.published_files).

What runs where (every exporter listens on 127.0.0.1 only: the node's own agent scrapes it):
- every node: node_exporter (release tarball, SHA-256 checked) with its textfile directory, and
  aicluster-node-metrics's timer (EFA and Lustre counters, aicluster/node/bin);
- GPU nodes: dcgm-exporter, the image Kubernetes runs, under enroot as root; none on a node of an
  architecture enroot has no pin for (arm64: it says so, and the plan leaves its pool out of the
  GPU alerts, design/observability.py);
- the head: the Slurm exporter, built from its tagged Go module (checked by sum.golang.org);
- AWS: Prometheus in agent mode remote-writes to AMP with SigV4 as the instance role, and the
  CloudWatch agent ships the log streams to /aicluster/<cluster>/<stream>;
- GCP: the Ops Agent scrapes the same exporters into Managed Service for Prometheus and ships the
  log streams as logs aicluster-<cluster>-<stream>, which the cluster's sink routes to its bucket.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from aicluster.catalog import dump_yaml
from aicluster.catalog.node_local import containers
from aicluster.catalog.observability import SlurmNodeAgents, counters_csv, exporters, scrape, slurm_node_agents, \
    textfile_directory
from aicluster.render.node_programs import program_text
from aicluster.render.templates import render
from aicluster.render.slurm_config import POWER_LOG, RECONCILE_LOG, SlurmRuntime
from aicluster.design.telemetry_backend import amp_remote_write, log_group_name, log_id

PROGRAM = "aicluster-monitoring"
NODE_METRICS_PROGRAM = "aicluster-node-metrics"
ROLES = ("head", "compute", "login")
# Only compute nodes have GPUs (the head and login nodes are CPU types: catalog images).
ROLE_GPU = (("head", False), ("compute", False), ("compute", True), ("login", False))
HEAD_POOL = "head"      # the head node's `pool` label
LOGIN_POOL = "login"    # the login nodes' `pool` label

# Replaced by the program with the node's values (each checked against a strict pattern first).
TOKENS = {"cluster": "@AICLUSTER_CLUSTER@", "pool": "@AICLUSTER_POOL@", "node": "@AICLUSTER_NODE@",
          "region": "@AICLUSTER_REGION@", "write_url": "@AICLUSTER_WRITE_URL@"}

# The scrape jobs: the same job names as the Kubernetes collectors (k8s_metrics DCGM, NODE_EXPORTER;
# a test keeps them equal: this render layer cannot import that Pulumi module).
NODE_JOB, DCGM_JOB, SLURM_JOB = "node-exporter", "dcgm-exporter", "slurm-exporter"

_SLURM_LOG_DIR = SlurmRuntime("", "").log_dir
# Written by syslog (rsyslog on Ubuntu): the kernel's lines, and everything else.
KERNEL_LOG = "/var/log/kern.log"
SYSLOG = "/var/log/syslog"
# The NVIDIA driver's XID lines ("NVRM: Xid (PCI:...): 79, ..."): the only kernel lines shipped.
XID_PATTERN = "NVRM: Xid"
HEALTH_CHECK_TAG = "aicluster-gpu-healthcheck"     # its syslog tag (aicluster/node/bin)


@dataclass(frozen=True)
class LogStream:
    """One log stream a role ships: the files it tails, and the pattern a line must hold ("" = all)."""
    stream: str                 # telemetry_backend.SLURM_LOG_STREAMS
    paths: tuple[str, ...]
    roles: tuple[str, ...]
    include: str = ""


LOG_STREAMS = (
    LogStream("slurmctld", (f"{_SLURM_LOG_DIR}/slurmctld.log",), ("head",)),
    LogStream("slurmd", (f"{_SLURM_LOG_DIR}/slurmd.log",), ("compute",)),
    LogStream("health-check", (SYSLOG,), ("compute",), HEALTH_CHECK_TAG),
    # The reconcile loop and the power programs (resume, suspend, resume-fail) it works with.
    LogStream("reconcile", (RECONCILE_LOG, POWER_LOG), ("head",)),
    LogStream("kernel", (KERNEL_LOG,), ROLES, XID_PATTERN),
)


def log_streams(role: str) -> tuple[LogStream, ...]:
    return tuple(s for s in LOG_STREAMS if role in s.roles)


def role_streams(role: str) -> list[str]:
    """The names of the streams a role's nodes ship (their log groups are all its role may write)."""
    return [s.stream for s in log_streams(role)]


def _ports() -> dict[str, int]:
    """exporter key -> the port it listens on (127.0.0.1 on a Slurm VM)."""
    return {key: e.port for key, e in exporters().items()}


def scrape_targets(role: str, gpu: bool) -> list[tuple[str, int]]:
    """(job, port on 127.0.0.1) of what the node's agent scrapes."""
    ports = _ports()
    targets = [(NODE_JOB, ports["node_exporter"])]
    if gpu:
        targets.append((DCGM_JOB, ports["dcgm_exporter"]))
    if role == "head":
        targets.append((SLURM_JOB, ports["slurm_exporter"]))
    return targets


def _scrape_configs(role: str, gpu: bool) -> list[dict]:
    return [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                                  "labels": {name: TOKENS[name] for name in scrape().target_labels}}]}
            for job, port in scrape_targets(role, gpu)]


def prometheus_agent_config(role: str, gpu: bool) -> str:
    """AWS: the agent's prometheus.yml (Prometheus --agent): scrape the node's exporters, remote-write
    to the cluster's AMP workspace with SigV4."""
    s = scrape()
    config = {"global": {"scrape_interval": f"{s.interval_s}s", "scrape_timeout": f"{s.timeout_s}s"},
              "scrape_configs": _scrape_configs(role, gpu),
              "remote_write": [amp_remote_write(TOKENS["write_url"], TOKENS["region"])]}
    return dump_yaml(config, sort_keys=False)


def cloudwatch_agent_config(role: str) -> str:
    """AWS: the CloudWatch agent's configuration: logs only (metrics go to AMP). Each stream into its
    group, one log stream per node and instance (a replaced node's instance writes a new one). No
    retention_in_days: the groups' retention is set by aicluster (30 days), and the agent would need
    logs:PutRetentionPolicy to set its own."""
    collect = []
    for s in log_streams(role):
        for path in s.paths:
            entry = {"file_path": path, "log_group_name": log_group_name(TOKENS["cluster"], s.stream),
                     "log_stream_name": TOKENS["node"] + "/{instance_id}"}
            if s.include:
                entry["filters"] = [{"type": "include", "expression": _regex(s.include)}]
            collect.append(entry)
    config = {"agent": {"run_as_user": "root"},
              "logs": {"logs_collected": {"files": {"collect_list": collect}}, "force_flush_interval": 5}}
    return json.dumps(config, indent=2) + "\n"


def ops_agent_config(role: str, gpu: bool) -> str:
    """GCP: the Ops Agent's config.yaml: a Prometheus receiver over the node's exporters (Managed
    Service for Prometheus), and one files receiver per stream, its receiver id the stream's log id
    (the Ops Agent names the log after the receiver)."""
    s = scrape()
    scrape_configs = [dict(job, scrape_interval=f"{s.interval_s}s", scrape_timeout=f"{s.timeout_s}s")
                      for job in _scrape_configs(role, gpu)]
    receivers, processors, pipelines = {}, {}, {}
    for stream in log_streams(role):
        rid = log_id(TOKENS["cluster"], stream.stream)
        receivers[rid] = {"type": "files", "include_paths": list(stream.paths), "record_log_file_path": True}
        pipeline = {"receivers": [rid]}
        if stream.include:
            name = f"only_{stream.stream.replace('-', '_')}"
            processors[name] = {"type": "exclude_logs",
                                "match_any": [f'jsonPayload.message !~ "{_regex(stream.include)}"']}
            pipeline["processors"] = [name]
        pipelines[rid] = pipeline
    logging: dict = {"receivers": receivers}
    if processors:
        logging["processors"] = processors
    logging["service"] = {"pipelines": pipelines}
    config = {"metrics": {"receivers": {"prometheus": {"type": "prometheus",
                                                       "config": {"scrape_configs": scrape_configs}}},
                          "service": {"pipelines": {"prometheus": {"receivers": ["prometheus"]}}}},
              "logging": logging}
    return dump_yaml(config, sort_keys=False)


def _regex(text: str) -> str:
    """A literal as a regular expression (the patterns here hold no metacharacter but ':' and ' ')."""
    if any(c in text for c in r".*+?[](){}|^$\\"):
        raise ValueError(f"not a plain pattern: {text!r}")
    return text


def monitoring_program(agents: SlurmNodeAgents | None = None) -> str:
    """The program's text. `agents` defaults to the catalog's pins (tests give their own digests)."""
    return _render_program(agents) if agents else _catalog_program()


@functools.lru_cache(maxsize=1)
def _catalog_program() -> str:
    """The program with the catalog's pins: the same text on every node of every cluster, so it is
    rendered once (every compute, login and head file set carries it)."""
    return _render_program(slurm_node_agents())


def _render_program(agents: SlurmNodeAgents) -> str:
    # (case pattern KIND/ROLE/GPU, configuration): the program picks its node's by that key.
    configs = [(f"{kind}/{role}/{str(gpu).lower()}", text) for role, gpu in ROLE_GPU
               for kind, text in (("prometheus", prometheus_agent_config(role, gpu)), ("ops", ops_agent_config(role, gpu)))]
    configs += [(f"cloudwatch/{role}/*", cloudwatch_agent_config(role)) for role in ROLES]
    return render("scripts/aicluster-monitoring.sh.j2", a=agents, configs=configs,
                  counters=counters_csv(), textfile_dir=textfile_directory(), tokens=TOKENS,
                  ports=_ports(), head_pool=HEAD_POOL,
                  node_metrics=NODE_METRICS_PROGRAM, interval_s=scrape().interval_s,
                  enroot_arches=containers().enroot.arches)


BIN = SlurmRuntime("", "").bin_dir
HEAD_ENV = "/etc/aicluster/monitoring.env"


def setup_command(cloud: str, role: str, env_file: str | None = None) -> list[str]:
    """How a bootstrap starts the program: in the background (--background: a transient systemd
    unit that retries every minute until it succeeds), so a slow download never holds up slurmd or
    slurmctld, and a failure is retried rather than lost."""
    command = [f"{BIN}/{PROGRAM}", "--cloud", cloud, "--role", role]
    if env_file:
        command += ["--env", env_file]
    return command + ["--background"]


def node_env_lines(write_url: str | None) -> str:
    """What a node's env file adds for the program: AWS, where its agent writes (none on GCP, whose
    Ops Agent writes to the project's own Managed Service for Prometheus)."""
    return f"AICLUSTER_METRICS_WRITE_URL={write_url}\n" if write_url else ""


# The keys of the head's published monitoring files, in install order (head_monitoring_files):
# known without rendering anything (slurm_files.published_keys lists them at import).
HEAD_MONITORING_KEYS = (f"bin/{NODE_METRICS_PROGRAM}", "aicluster/monitoring.env", f"bin/{PROGRAM}")


def head_monitoring_files(cloud: str, cluster: str, write_url: str | None) -> list[tuple[str, str, str, str, tuple]]:
    """(key, path, content, mode, run) of what the head installs from its published files: the node
    metrics program, its settings, then the program, whose run sets up the head's monitoring (run
    again by aicluster-sync whenever the program or the settings change)."""
    run = tuple(setup_command(cloud, "head", HEAD_ENV))
    settings = f"AICLUSTER_CLUSTER={cluster}\nAICLUSTER_POOL={HEAD_POOL}\nAICLUSTER_GPUS=0\n" + node_env_lines(write_url)
    metrics_key, env_key, program_key = HEAD_MONITORING_KEYS
    return [(metrics_key, f"{BIN}/{NODE_METRICS_PROGRAM}", program_text(NODE_METRICS_PROGRAM), "0755", ()),
            (env_key, HEAD_ENV, settings, "0644", run),
            (program_key, f"{BIN}/{PROGRAM}", monitoring_program(), "0755", run)]


def node_programs() -> dict[str, str]:
    """{name: text} of the programs every Slurm compute node installs in its bin directory."""
    return {PROGRAM: monitoring_program(), NODE_METRICS_PROGRAM: program_text(NODE_METRICS_PROGRAM)}
