"""The login nodes' user data, the same on every cloud (cloud-init/login.yaml.j2 with per-cloud
blocks). Pure: texts out of names and ids, nothing of the design's pools or filesystems, so a
routine spec edit renders byte-identical user data and the login nodes stay untouched.

The cloud's part is where the programs come from, as for the head node: AWS user data carries
aicluster-fetch and a list of content-addressed keys in the configuration bucket (EC2 takes at most
16 KB of user data, and later features need room); GCP metadata (256 KB) carries the programs.
"""
from __future__ import annotations

import hashlib
import json

from .render import render, static
from .slurm_config import SLURMCTLD_PORT, node_domain
from .slurm_files import BIN, CONFIG_PREFIX

# The filesystems' mount script as published for the head (slurm_files.published_files): the
# login nodes read this one key of the head's files and nothing else of them.
MOUNT_SCRIPT_KEY = f"{CONFIG_PREFIX}bin/aicluster-mount-storage"
# AWS: the login nodes' own programs, at content-addressed keys under this prefix.
LOGIN_PREFIX = "login/"
FETCH_LIST = "/etc/aicluster/login-files.json"
_PROGRAMS = {"aicluster-secret": "scripts/aicluster-secret.py",
             "aicluster-login-bootstrap": "scripts/aicluster-login-bootstrap"}


def login_programs() -> list[tuple[dict, str]]:
    """(fetch-list entry, content) of each login program: key login/<name>/<sha256>, installed in BIN."""
    out = []
    for name, template in _PROGRAMS.items():
        text = static(template)
        digest = hashlib.sha256(text.encode()).hexdigest()
        out.append(({"key": f"{LOGIN_PREFIX}{name}/{digest}", "path": f"{BIN}/{name}", "mode": "0755",
                     "sha256": digest}, text))
    return out


def login_user_data(*, cloud: str, cluster: str, region: str, hostname: str, controller_addr: str,
                    munge_secret: str, bucket: str) -> str:
    """A login node's cloud-config. controller_addr: the head's private address (slurmctld);
    munge_secret: the munge key's ARN (aws) or projects/<p>/secrets/<id> (gcp); bucket: the
    configuration bucket the head's files are published to."""
    programs = {entry["path"].rsplit("/", 1)[1]: text for entry, text in login_programs()}
    fetch_list = json.dumps({"bucket": bucket, "region": region, "files": [e for e, _ in login_programs()]},
                            indent=1) + "\n"
    return render("cloud-init/login.yaml.j2", cloud=cloud, cluster=cluster, region=region, hostname=hostname,
                  controller=f"{controller_addr}:{SLURMCTLD_PORT}", munge_secret=munge_secret, bucket=bucket,
                  mount_key=MOUNT_SCRIPT_KEY, dns_domain=node_domain(cluster), bin=BIN,
                  fetch_list_path=FETCH_LIST, fetch_list=fetch_list if cloud == "aws" else "",
                  fetch_script=static("scripts/aicluster-fetch.py") if cloud == "aws" else "",
                  secret_script=programs["aicluster-secret"], bootstrap_script=programs["aicluster-login-bootstrap"],
                  gcp_module=static("scripts/aicluster_gcp.py") if cloud == "gcp" else "")
