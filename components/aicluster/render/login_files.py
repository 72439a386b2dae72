"""The login nodes' user data, the same on every cloud (cloud-init/login.yaml.j2 with per-cloud
blocks). Pure: texts out of names and ids, nothing of the design's pools or filesystems, so a
routine spec edit renders byte-identical user data and the login nodes stay untouched.

The cloud's part is where the programs come from, as for the head node: AWS user data carries
aicluster-fetch and a list of content-addressed keys in the configuration bucket (EC2 takes at most
16 KB of user data, and later features need room); GCP metadata (256 KB) carries the programs.

The login node gives users the cluster's tools (issue 15, "Slurm a research team can live on"):
- containers: the compute nodes' own aicluster-containers (enroot and pyxis at the catalog's pins),
  one of the login node's programs. It is rendered from the catalog alone, never from the spec, so
  carrying it keeps the user data byte-identical across routine edits.
- the fabric check: aicluster-nccl-check and its expectations (cluster.json `nccl_check`) follow the
  pools, so they are never in the user data: the login node reads them from the head's published
  files (HEAD_KEYS_READ), at boot and every 5 minutes (aicluster-login-refresh.timer), as it reads
  the mount script. A timer, not boot only: a pool added later brings its instance type's expected
  bandwidth, and a check that did not know it would report that type "errors only".
"""
from __future__ import annotations

import json

from aicluster.render.node_local_files import CONTAINERS_PROGRAM, node_local_programs
from aicluster.render.node_programs import NODE_PROGRAMS, node_files, program_text
from aicluster.render.templates import render
from aicluster.render.slurm_config import SLURMCTLD_PORT, node_domain
from aicluster.render.slurm_files import BIN, CONFIG_PREFIX, BootFile, digest as content_digest
from aicluster.render.slurm_monitoring import LOGIN_POOL
from aicluster.render.slurm_monitoring import node_programs as monitoring_programs

# The head's published files (slurm_files.published_files) the login nodes read, and nothing else
# of them: the filesystems' mount script, the fabric check and the cluster's facts it reads
# (of which the login node keeps only what its programs read: aicluster-login-bootstrap drops how
# the pools' nodes are launched before writing /etc/aicluster/cluster.json, readable by every user).
MOUNT_SCRIPT_KEY = f"{CONFIG_PREFIX}bin/aicluster-mount-storage"
NCCL_CHECK_KEY = f"{CONFIG_PREFIX}bin/aicluster-nccl-check"
CLUSTER_JSON_KEY = f"{CONFIG_PREFIX}aicluster/cluster.json"
HEAD_KEYS_READ = (MOUNT_SCRIPT_KEY, NCCL_CHECK_KEY, CLUSTER_JSON_KEY)
# AWS: the login nodes' own programs, at content-addressed keys under this prefix.
LOGIN_PREFIX = "login/"
FETCH_LIST = "/etc/aicluster/login-files.json"
_PROGRAMS = {"aicluster-login-bootstrap": "aicluster-login-bootstrap"}
# The login node's programs of aicluster.node (render/node_programs.py): the secret helper and the
# baked image's check.
_NODE_PROGRAMS = NODE_PROGRAMS


def _program_texts() -> dict[str, str]:
    """{name: text} of the login node's own shell programs: its set-up, the compute nodes'
    container installer (node_local_files: the catalog's pins, nothing of the spec) and what
    watches it (slurm_monitoring: the same program as every Slurm VM's, role login)."""
    texts = {name: program_text(source) for name, source in _PROGRAMS.items()}
    texts[CONTAINERS_PROGRAM] = node_local_programs()[CONTAINERS_PROGRAM]
    return texts | monitoring_programs()


def login_files() -> list[tuple[str, str | bytes, str]]:
    """(path, content, mode) of every login program: the archive of aicluster.node and the secret
    helper's entry point, then the shell programs, in BIN."""
    return [*node_files(_NODE_PROGRAMS, BIN),
            *[(f"{BIN}/{name}", text, "0755") for name, text in _program_texts().items()]]


def login_programs() -> list[tuple[dict, str | bytes]]:
    """(fetch-list entry, content) of each login program: key login/<name>/<sha256>, where name is
    the file's name (aicluster-secret, aicluster-node-<sha12>.pyz)."""
    out = []
    for path, text, mode in login_files():
        name = path.rsplit("/", 1)[1]
        digest = content_digest(text)
        out.append(({"key": f"{LOGIN_PREFIX}{name}/{digest}", "path": path, "mode": mode, "sha256": digest}, text))
    return out


def login_user_data(*, cloud: str, cluster: str, region: str, hostname: str, controller_addr: str,
                    munge_secret: str, bucket: str, metrics_write_url: str | None = None,
                    image_contents: str = "") -> str:
    """A login node's cloud-config. controller_addr: the head's private address (slurmctld);
    munge_secret: the munge key's ARN (aws) or projects/<p>/secrets/<id> (gcp); bucket: the
    configuration bucket the head's files are published to; metrics_write_url: aws, the AMP
    workspace's remote-write URL (the node's metrics agent writes there); image_contents: the baked
    image's contents key when the node boots one (it then installs nothing, docs/images.md)."""
    programs = _program_texts()
    fetch_list = json.dumps({"bucket": bucket, "region": region, "files": [e for e, _ in login_programs()]},
                            indent=1) + "\n"
    return render("cloud-init/login.yaml.j2", cloud=cloud, cluster=cluster, region=region, hostname=hostname,
                  controller=f"{controller_addr}:{SLURMCTLD_PORT}", munge_secret=munge_secret, bucket=bucket,
                  mount_key=MOUNT_SCRIPT_KEY, nccl_check_key=NCCL_CHECK_KEY, cluster_json_key=CLUSTER_JSON_KEY,
                  dns_domain=node_domain(cluster), bin=BIN,
                  fetch_list_path=FETCH_LIST, fetch_list=fetch_list if cloud == "aws" else "",
                  node_files=[BootFile(path, text, mode) for path, text, mode in
                              node_files(("aicluster-fetch",) if cloud == "aws" else _NODE_PROGRAMS, BIN)],
                  bootstrap_script=programs["aicluster-login-bootstrap"],
                  containers_script=programs[CONTAINERS_PROGRAM],
                  monitoring_programs=monitoring_programs() if cloud == "gcp" else {},
                  login_pool=LOGIN_POOL, metrics_write_url=metrics_write_url or "", image_contents=image_contents)
