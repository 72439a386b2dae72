"""A boot that installs nothing (issue 26): a compute node booted from a baked image, run for real
in the join programs' scratch tree (tests/support/node_bootstrap.py) with the real
aicluster-node-install installed as a node has it, and every program that could install something
(apt-get, apt-mark, dpkg, curl beyond the loopback metadata server, wget, git, make, gcc, cc,
docker, ctr, aicluster-install-slurm) a recorder. The same boot without the baked image's setting
does install: the recorders catch installs, so their silence means something. The login node's
boot: tests/scripts/test_login_bootstrap.py (its own harness)."""
from __future__ import annotations

import json
import sys

from aicluster.catalog.slurm_release import slurm_release
from aicluster.render.node_image import contents_key
from tests.support import node_programs
from tests.support.node_bootstrap import (  # noqa: F401  (fixtures: pytest finds them by name)
    AWS_SCRIPT, GCP_SCRIPT, aws, bootstrap_error, ec2_endpoint, gcp, meta, node)

# Anything that installs, downloads or builds: recorded, and never run. aicluster-install-slurm too
# (aicluster-node-install --slurm; it downloads with Python, not curl): a baked boot never starts it.
INSTALLERS = ("apt-get", "apt-mark", "dpkg", "wget", "git", "make", "gcc", "cc", "docker", "ctr", "configure",
              "aicluster-install-slurm")
# curl: the metadata server on loopback is the node's own; anything else is a download.
CURL = '''#!/bin/bash
for arg in "$@"; do
  case $arg in
    http://127.0.0.1:*) exec /usr/bin/curl "$@" ;;
    http*) echo "curl-download $arg" >> "${0%/*}/calls"; exit 22 ;;
  esac
done
exec /usr/bin/curl "$@"
'''


def boot_node(node, contents: str | None, manifest: str | None = None) -> None:
    """The node's aicluster-node-install, the recorders, and (with `manifest`) the image's manifest."""
    node_programs.install(node.programs, ["aicluster-node-install"], python=sys.executable)
    for name in INSTALLERS:
        node._stub(name, f'#!/bin/bash\necho "{name} $*" >> "${{0%/*}}/calls"\n')
    node_programs.record_slurm_install(node.programs, node.bin / "calls")
    node._stub("curl", CURL)
    if contents:
        env = node.root / "etc" / "aicluster" / "node.env"
        env.write_text(env.read_text() + f"AICLUSTER_IMAGE_CONTENTS={contents}\n")
    if manifest:
        (node.root / "etc" / "aicluster" / "image.json").write_text(json.dumps({
            "contents": manifest, "built_at": "2026-11-28T07:00:00Z",
            "found": {"slurmd": "slurm 24.11.5", "nvidia_driver": "580.95.05"}}))


def installs(node) -> list[str]:
    return [c for c in node.calls() if c.split()[0] in (*INSTALLERS, "curl-download")]


def test_an_aws_node_on_its_baked_image_joins_and_installs_nothing(aws):
    key = contents_key("aws")
    boot_node(aws, key, manifest=key)
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert aws.slurmd_started()
    assert installs(aws) == []
    assert f"baked image: contents {key}, built 2026-11-28T07:00:00Z" in run.stderr
    metric = (aws.root / "var/lib/node_exporter/textfile/aicluster_node_image.prom").read_text()
    assert f'aicluster_node_image_info{{contents="{key}",slurm="slurm 24.11.5",driver="580.95.05",' in metric


def test_the_same_boot_without_a_baked_image_does_install(aws):
    """The control: a node with no slurmd and no baked image installs Slurm, and the recorders see it."""
    boot_node(aws, None)
    (aws.bin / "slurmd").unlink()
    run = aws.run(AWS_SCRIPT)
    seen = installs(aws)
    assert any(c.startswith("apt-get install") for c in seen), (run.stderr, aws.calls())
    assert any(c.startswith(f"aicluster-install-slurm {slurm_release().install_args()}") for c in seen), seen


def test_the_same_gcp_boot_without_a_baked_image_does_install(gcp):
    boot_node(gcp, None)
    (gcp.bin / "slurmd").unlink()
    gcp.run(GCP_SCRIPT)
    seen = installs(gcp)
    assert any(c.startswith("apt-get install") for c in seen) and \
        any(c.startswith("aicluster-install-slurm --version") for c in seen), seen


def test_an_image_baked_for_other_pins_never_joins_and_says_both_keys(aws):
    key = contents_key("aws")
    boot_node(aws, key, manifest="00000000deadbeef")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1
    assert not aws.slurmd_started() and installs(aws) == []
    assert aws.error_tag() == f"image: baked for contents 00000000deadbeef, this cluster's pins are {key}"


def test_an_image_not_baked_by_aicluster_never_joins(aws):
    boot_node(aws, contents_key("aws"))
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1 and installs(aws) == []
    assert aws.error_tag() == "image: no /etc/aicluster/image.json: this image was not baked by aicluster"


def test_a_baked_image_without_slurmd_is_an_error_not_an_install(aws):
    key = contents_key("aws")
    boot_node(aws, key, manifest=key)
    (aws.bin / "slurmd").unlink()
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 1 and installs(aws) == []
    assert aws.error_tag() == f"packages: the baked image (contents {key}) has no slurmd"


def test_a_gcp_node_on_its_baked_image_joins_and_installs_nothing(gcp, meta):
    key = contents_key("gcp")
    boot_node(gcp, key, manifest=key)
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert gcp.slurmd_started() and installs(gcp) == []
    assert bootstrap_error(meta) is None


def test_a_gcp_node_on_another_image_says_why(gcp, meta):
    boot_node(gcp, contents_key("gcp"), manifest="00000000deadbeef")
    run = gcp.run(GCP_SCRIPT)
    assert run.returncode == 1 and installs(gcp) == []
    assert bootstrap_error(meta).startswith("image: baked for contents 00000000deadbeef")
