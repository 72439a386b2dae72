"""What runs on the nodes: the head's, login and compute nodes' programs and the GPU health pods'.

Owns the node side of aicluster. A node gets the modules its programs need in /opt/aicluster/lib
and each program as a thin entry point in /opt/aicluster/bin (aicluster.render.node_programs):
  slurm.py          the power programs' shared core: hostlists, scontrol, resume and suspend, logging
  reconcile.py      the reconcile loop the head's timer runs (docs/reconcile.md)
  aws_power.py      resume, suspend, resume-fail and reconcile on EC2 (aicluster-power.py)
  gcp_power.py      the same on Compute Engine (aicluster-gcp-power.py)
  gcp.py            the Google REST calls the GCP programs make (metadata token, Compute, DNS, GCS)
  sync.py           aicluster-sync: the head installs the published files from the bucket
  fetch.py          aicluster-fetch: a node installs its programs, each checked by its SHA-256
  secret.py         aicluster-secret: a secret into a file, never through argv
  lustre_import.py  aicluster-gcp-lustre-import: start Managed Lustre imports once each
  image.py          aicluster-node-install: bake a node image; check at boot it is the cluster's
  install_slurm.py  aicluster-install-slurm: build the pinned Slurm from SchedMD's source archive
  health_agent.py   the Kubernetes GPU node health agent (a DaemonSet pod runs it)

May import: the standard library, boto3/botocore and each other (absolute: `from aicluster.node
import slurm`); nothing else of aicluster. The nodes have none of the rest of aicluster.
"""

__all__: list[str] = []
