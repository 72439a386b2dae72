"""What a Slurm head node runs from, the same on every cloud: its user data and the files published
for it. Pure (no Pulumi): the head's user data from a ClusterContext, the published files from the
whole ClusterDesign (they render slurm.conf), with the cloud's facts; file texts out.

One shape with the cloud's parts plugged in (issue 12, "One copy of each shared thing"):
- the head's cloud-config is one template, cloud-init/head.yaml.j2, with per-cloud blocks (where
  its programs come from, which secret store holds the munge key);
- the published files are the same Slurm files, cluster.json, accounting.json, the nodes' programs
  and the filesystems' mount script, installed by aicluster-sync from one manifest; a cloud adds
  its own entries (GCP: the Managed Lustre imports) and names its power program;
- the head builds pyxis once for every node (aicluster-pyxis-build, node_local_files), run by
  aicluster-sync when it is installed, as the head's monitoring is set up.

The cloud components (components/aicluster/aws/slurm.py, components/aicluster/gcp/slurm.py) put
these texts into their bucket and their head node.
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Mapping

from aicluster.design.accounting import AccountingDesign
from aicluster.catalog.accounting_db import accounting_catalog
from aicluster.catalog.slurm_release import nccl_check_config
from aicluster.design.model import ClusterContext, ClusterDesign
from aicluster.design.parts import PoolDesign
from aicluster.mounts import Mount
from aicluster.render.node_local_files import PYXIS_BUILD_PROGRAM, pyxis_build_program
from aicluster.render.node_artifact import NodeArtifact
from aicluster.render.node_programs import INSTALL_DIR, artifact, node_files, program_text
from aicluster.render.templates import render
from aicluster.render.slurm_config import (POWER_LOG, RECONCILE_LOG, SLURM_CONFIG_FILES, SlurmRuntime, node_domain,
                                    render_slurm_configs)
from aicluster.render.slurm_monitoring import HEAD_MONITORING_KEYS, head_monitoring_files

CONFIG_PREFIX = "head/"                 # the head's published files, under this prefix of the bucket
BIN = "/opt/aicluster/bin"              # where aicluster's programs are installed, on every node
# The filesystems' mount script, at one path on every node (head, compute, TPU host) and cloud.
MOUNT_SCRIPT = "/usr/local/sbin/aicluster-mount-storage"
# The power program's links: slurmctld runs the first three, aicluster-reconcile.timer the last
# (aicluster/node/reconcile.py, docs/reconcile.md).
POWER_LINKS = ("aicluster-resume", "aicluster-suspend", "aicluster-resume-fail", "aicluster-reconcile")
# The reconcile loop's replacement cap: at most this fraction of all nodes (at least one) powered down
# for replacement a pass, none in a pool while this fraction of it (at least one node) is on its way
# down or back up; one bad event or health-check bug cannot take the fleet down at once.
RECONCILE_REPLACE_FRACTION = 0.10
RECONCILE_POOL_REPLACING_FRACTION = 0.25
# Programs of aicluster.node every head runs, beside its cloud's (render/node_programs.py).
# aicluster-install-slurm: the head's Slurm (cloud-init runs it at first boot; published too, so
# the head has the one that matches the catalog's pin).
HEAD_NODE_PROGRAMS = ("aicluster-secret", "aicluster-install-slurm")
# Shell programs every head runs (published name -> template).
HEAD_PROGRAMS = {"aicluster-accounting": "aicluster-accounting",
                 # The fabric check users run (docs/fabric-check.md); its expectations: cluster.json.
                 "aicluster-nccl-check": "aicluster-nccl-check"}
LIBRARY_MODE, PROGRAM_MODE, DATA_MODE = "0644", "0755", "0644"
PYXIS_BUILD_KEY = f"bin/{PYXIS_BUILD_PROGRAM}"


def head_hostname(cluster_name: str) -> str:
    return f"{cluster_name}-head"


def slurm_pools(design: ClusterDesign) -> list[PoolDesign]:
    """The pools the power programs launch: every pool but Cloud TPU slices (Pulumi's, not Slurm's)."""
    return [p for p in design.pools if p.tpu is None]


# The archive of aicluster.node (render/node_programs.py) is published at one key whatever its
# content (the manifest pins its SHA-256 and the path it installs at names it), so a changed module
# updates one object in place rather than replacing it under a head that may be reading the set.
ARTIFACT_KEY = "lib/aicluster-node.pyz"


def published_archive(programs: Iterable[str]) -> NodeArtifact:
    """The archive the head installs from the bucket: the one of `programs` (the cloud's) and
    HEAD_NODE_PROGRAMS, known without any output of the cluster."""
    return artifact([*programs, *HEAD_NODE_PROGRAMS])


def node_program_keys(programs: Iterable[str]) -> list[str]:
    """The published keys of `programs` of aicluster.node and of the head's own: the archive they
    run from (0644) first, then their entry points (bin/<name>, 0755)."""
    names = [*programs, *HEAD_NODE_PROGRAMS]
    return [ARTIFACT_KEY] + [f"bin/{p}" for p in names]


def _key(path: str) -> str:
    """A published key is its path under /opt/aicluster (bin/...), the archive's ARTIFACT_KEY."""
    return ARTIFACT_KEY if path.startswith(f"{INSTALL_DIR}/lib/") else path[len(INSTALL_DIR) + 1:]


def digest(content: str | bytes) -> str:
    """The SHA-256 of what a node writes: text as UTF-8, bytes (the archive) as they are."""
    return hashlib.sha256(content if isinstance(content, bytes) else content.encode()).hexdigest()


# --- the head's user data ------------------------------------------------------------------------

@dataclass(frozen=True)
class BootFile:
    """A file the head's user data writes itself (path, mode, content)."""
    path: str
    content: str | bytes
    mode: str = PROGRAM_MODE

    @property
    def b64(self) -> str | None:
        """Bytes (the archive of aicluster.node) travel base64-encoded (cloud-init's `encoding: b64`);
        None for text, which the templates write as it is."""
        return base64.b64encode(self.content).decode() if isinstance(self.content, bytes) else None


def head_user_data(context: ClusterContext, *, cloud: str, bucket: str, munge_secret: str,
                   sync: Mapping[str, str], boot_files: Iterable[BootFile]) -> str:
    """The head's cloud-config (cloud-init/head.yaml.j2). Its inputs depend on the cluster name, the
    bucket, the munge secret and the programs only, so it stays byte-identical across routine edits.
    `sync` is /etc/aicluster/sync.json; `boot_files` are written by cloud-init itself."""
    return render("cloud-init/head.yaml.j2", cloud=cloud, cluster=context.name, munge_secret=munge_secret,
                  dns_domain=node_domain(context.name), bin=BIN,
                  sync_config=json.dumps({**sync, "bucket": bucket, "prefix": CONFIG_PREFIX,
                                          "region": context.region}),
                  boot_files=list(boot_files))


# --- the published files ------------------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    """One published file: its key under CONFIG_PREFIX, where aicluster-sync installs it, its mode,
    what sync runs after installing it, whether slurmctld is reconfigured."""
    key: str
    path: str
    content: str | bytes
    mode: str = DATA_MODE
    run: tuple[str, ...] = ()
    reconfigure: bool = False

    def entry(self) -> dict:
        # The content's hash: aicluster-sync installs nothing of a set whose object does not match
        # (an object replaced while the set is read, a truncated download).
        out: dict = {"key": self.key, "path": self.path, "mode": self.mode,
                     "sha256": digest(self.content)}
        if self.reconfigure:
            out["reconfigure"] = True
        if self.run:
            out["run"] = list(self.run)
        return out


def published_keys(programs: Iterable[str], extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every key published_files returns, known before any content (one bucket object each):
    `programs` and `extra` as given to published_files (their names, their keys)."""
    return (*[f"slurm/{f}" for f in SLURM_CONFIG_FILES], "aicluster/cluster.json", "aicluster/accounting.json",
            *extra, *node_program_keys(programs), *[f"bin/{p}" for p in HEAD_PROGRAMS],
            "bin/aicluster-mount-storage", PYXIS_BUILD_KEY, *HEAD_MONITORING_KEYS,
            "manifest.json")


def reconcile_facts(design: ClusterDesign) -> dict:
    """The reconcile loop's settings in cluster.json. grace_s: an instance no powered-up node owns is
    terminated only once older than this; a resume may take all of ResumeTimeout, so it is that."""
    return {"grace_s": design.slurm.resume_timeout_s, "replace_fraction": RECONCILE_REPLACE_FRACTION,
            "pool_replacing_fraction": RECONCILE_POOL_REPLACING_FRACTION, "log_file": RECONCILE_LOG}


def accounting_settings(design: ClusterDesign, password_secret: str | None,
                        endpoint: Mapping[str, str] | None) -> dict:
    """/etc/aicluster/accounting.json, what aicluster-accounting converges on: whether accounting
    is on, the password's secret, the database (null: MariaDB on the head) and the QoS and default
    account it creates."""
    acc = design.slurm.accounting_settings
    if acc is None and design.slurm.accounting:      # a SlurmDesign made by hand: the head's MariaDB
        acc = AccountingDesign(database=None, account=accounting_catalog().account, qos=accounting_catalog().qos)
    if acc is None:
        return {"enabled": False, "password_secret": password_secret}
    database = None
    if acc.database is not None:
        db = acc.database
        database = {"port": db.port, "name": db.name, "user": db.user, "tls_ca_url": db.ca_bundle_url,
                    **(endpoint or {})}
    return {"enabled": True, "password_secret": password_secret, "cluster": design.name, "database": database,
            "account": acc.account,
            "qos": [{"name": q.name, "priority": q.priority, "usage_factor": q.usage_factor} for q in acc.qos]}


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def published_files(design: ClusterDesign, *, controller_addr: str, cluster: dict, programs: Iterable[str],
                    power_program: str, accounting_secret: str | None, mounts: list[Mount] = (),
                    node_addrs: Mapping[str, str] | None = None, extra: Iterable[Published] = (),
                    accounting_endpoint: Mapping[str, str] | None = None,
                    metrics_write_url: str | None = None) -> dict[str, str | bytes]:
    """key -> content of everything the head installs from the bucket, with manifest.json, the list
    aicluster-sync follows. `cluster` is the cloud's part of cluster.json (how to launch a pool's
    nodes); `programs` the cloud's programs of aicluster.node (installed names, render/node_programs.py),
    installed with the modules they need beside HEAD_NODE_PROGRAMS and HEAD_PROGRAMS;
    `extra` its own files, installed after the accounting settings. `accounting_endpoint`: the
    managed accounting database's address and CA ({"host", and "tls_ca_pem" or "tls_ca_url"}),
    known once the cloud made it; None with the database on the head. `metrics_write_url`: AWS, the
    AMP workspace's remote-write URL the head's agent writes to (slurm_monitoring)."""
    # Pid files where Ubuntu's slurm units expect them (/run/slurmctld.pid, /run/slurmd.pid).
    runtime = SlurmRuntime(controller_host=head_hostname(design.name), controller_addr=controller_addr, run_dir="/run",
                           accounting_host=head_hostname(design.name) if design.slurm.accounting else None,
                           node_addrs=node_addrs or {})
    configs = render_slurm_configs(design, runtime)
    facts = {
        "cluster": design.name, "region": design.region,
        # Where the power programs write and delete <node>.<dns_domain> (cloud_dns).
        "dns_domain": node_domain(design.name),
        "static_nodes": [p.static_hostlist for p in slurm_pools(design) if p.static_hostlist],
        "log_file": POWER_LOG,
        # A resume must finish well inside it, or slurmctld calls resume-fail on nodes it launched.
        "resume_timeout_s": design.slurm.resume_timeout_s,
        "reconcile": reconcile_facts(design),
        # aicluster-nccl-check: the busbw the cluster's instance types should reach (catalog).
        "nccl_check": nccl_check_config(p.instance.name for p in slurm_pools(design)),
        **cluster,
    }
    files = [
        *[Published(f"slurm/{f}", f"{runtime.conf_dir}/{f}", configs[f], reconfigure=True)
          for f in SLURM_CONFIG_FILES],
        Published("aicluster/cluster.json", "/etc/aicluster/cluster.json", _json(facts)),
        # The archive before the entry points that run it.
        *[Published(_key(path), path, text, mode) for path, text, mode in node_files([*programs, *HEAD_NODE_PROGRAMS], BIN)],
        *[Published(f"bin/{name}", f"{BIN}/{name}", program_text(source), PROGRAM_MODE) for name, source in HEAD_PROGRAMS.items()],
        # After the programs, so the set-up they ask for is installed. The mount script runs
        # whenever it changes (a filesystem added); the fstab lines it writes mount at boot.
        Published("bin/aicluster-mount-storage", MOUNT_SCRIPT, render("scripts/mount-storage.sh.j2", mounts=list(mounts)),
                  PROGRAM_MODE, run=(MOUNT_SCRIPT,)),
        Published("aicluster/accounting.json", "/etc/aicluster/accounting.json",
                  _json(accounting_settings(design, accounting_secret, accounting_endpoint)),
                  run=(f"{BIN}/aicluster-accounting",)),
        *extra,
        # pyxis, built once here for every compute and login node and published in the bucket
        # (node_local_files), in the background: a run again only when the program changes (a new pin).
        Published(PYXIS_BUILD_KEY, f"{BIN}/{PYXIS_BUILD_PROGRAM}", pyxis_build_program(), PROGRAM_MODE,
                  run=(f"{BIN}/{PYXIS_BUILD_PROGRAM}", "--background")),
        # Last: watching the head (slurm_monitoring), set up in the background, never in the way of
        # slurmctld's start; a changed program or setting sets it up again.
        *[Published(key, path, content, mode, run=run)
          for key, path, content, mode, run in head_monitoring_files(design.cloud, design.name, metrics_write_url)],
    ]
    manifest = {"files": [f.entry() for f in files],
                "links": [{"path": f"{BIN}/{link}", "target": power_program} for link in POWER_LINKS]}
    out = {f.key: f.content for f in files}
    out["manifest.json"] = json.dumps(manifest, indent=2) + "\n"
    return out
