"""aicluster:gcp:NodeImage: a builder VM bakes its boot disk and powers off, a Compute Engine image
is made from the disk, and the GPU pools and login nodes boot it. The builder's startup script is run
for real (bash, with a fake metadata server and poweroff), and the wait on the bake is driven through
its outcomes (done, failed, still running)."""
from __future__ import annotations

import copy
import os
import subprocess
import textwrap
import types

import pytest

from aicluster.gcp import image as gcp_image
from aicluster.render import node_image
from tests.support import GCP_PROJECT, run_spec, stack_spec

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
IMAGE = "gcp:compute/image:Image"


def spec(**keys) -> dict:
    out = copy.deepcopy(stack_spec("gcp-a3mega-slurm"))
    out.setdefault("slurm", {})["node_image"] = keys
    return out


@pytest.fixture(scope="module")
def plan():
    return run_spec(spec(build=True))


def test_pools_and_login_nodes_boot_the_image_made_from_the_builder_disk(plan):
    (image,) = plan.of_type(IMAGE)
    (builder,) = [r for r in plan.of_type(INSTANCE) if r.name.endswith("-node-image-builder")]
    assert image.inputs["sourceDisk"] == builder.outputs["bootDisk"]["source"]
    assert image.inputs["family"] == f"{spec()['name']}-node"
    assert image.inputs["labels"]["aicluster-image-contents"] == node_image.contents_key("gcp")
    link = image.outputs["selfLink"]
    pools = [t for t in plan.of_type(TEMPLATE)]
    assert pools and all(t.inputs["disks"][0]["sourceImage"] == link for t in pools)
    logins = [r for r in plan.of_type(INSTANCE) if "-login-" in r.name]
    assert logins and all(r.inputs["bootDisk"]["initializeParams"]["image"] == link for r in logins)
    assert plan.outputs["node_image"] == link


def test_the_builder_is_private_shielded_and_has_no_service_account(plan):
    (builder,) = [r for r in plan.of_type(INSTANCE) if r.name.endswith("-node-image-builder")]
    i = builder.inputs
    assert all(not nic.get("accessConfigs") for nic in i["networkInterfaces"])
    assert "serviceAccount" not in i or not i["serviceAccount"]
    assert i["shieldedInstanceConfig"]["enableSecureBoot"] is True
    assert i["bootDisk"]["initializeParams"]["image"].endswith("ubuntu-accelerator-2404-amd64-with-nvidia-580")
    chunks = [k for k in i["metadata"] if k.startswith("aicluster-bake-tar-")]
    assert "".join(i["metadata"][f"aicluster-bake-tar-{n}"] for n in range(len(chunks))) == \
        "".join(gcp_image.tar_chunks())


def test_the_startup_script_passes_shellcheck(plan):
    (builder,) = [r for r in plan.of_type(INSTANCE) if r.name.endswith("-node-image-builder")]
    run = subprocess.run(["shellcheck", "-s", "bash", "-"], input=builder.inputs["metadata"]["startup-script"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


# --- the startup script, run ------------------------------------------------------------------------


FAKE_CURL = """#!/bin/bash
# Fake metadata server: GET .../attributes/KEY prints $MD/KEY; PUT --data V .../guest-attributes/...
# appends V to $MD/guest-attribute.
data="" url=""
while (($#)); do
  case $1 in
    --data) data=$2; shift 2 ;;
    -H | -X) shift 2 ;;
    -*) shift ;;
    *) url=$1; shift ;;
  esac
done
case $url in
  */guest-attributes/*) printf '%s\\n' "$data" >>"$MD/guest-attribute" ;;
  */attributes/*) cat "$MD/${url##*/}" 2>/dev/null || exit 22 ;;
  *) exit 22 ;;
esac
"""


def run_startup(tmp_path, bake_body: str, missing: int | None = None):
    """The builder's startup script against a scratch root: fake curl (metadata) and poweroff, and a
    fake bake program at the bake command's path that runs `bake_body`."""
    key = node_image.contents_key("gcp")
    md, bin_dir, root = tmp_path / "md", tmp_path / "bin", tmp_path / "root"
    for folder in (md, bin_dir, root / "var/log"):
        folder.mkdir(parents=True, exist_ok=True)
    chunks = gcp_image.tar_chunks()
    for n, chunk in enumerate(chunks):
        if n != missing:
            (md / f"aicluster-bake-tar-{n}").write_text(chunk)
    for name, text in (("curl", FAKE_CURL), ("poweroff", f"#!/bin/sh\necho off >>{md}/poweroff\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    script = gcp_image.startup_script(key, len(chunks), root=str(root), tar=str(tmp_path / "bake.tar"))
    # The bake command's program is in the tar; in the scratch root it is replaced by the fake.
    command = node_image.bake_command("gcp")
    fake = root / command[0].lstrip("/")
    script = script.replace(" ".join(command), f"{fake}", 1)
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text("#!/bin/bash\nset -e\n" + bake_body.replace("$ROOT", str(root)).replace("$KEY", key))
    fake.chmod(0o755)
    # ... and the tar would put the real program back over it: keep the fake.
    script = script.replace(f"-C {root} --no-same-owner", f"-C {root} --no-same-owner --exclude={command[0].lstrip('/')}")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MD": str(md)}
    run = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    attribute = (md / "guest-attribute").read_text() if (md / "guest-attribute").exists() else ""
    powered_off = (md / "poweroff").exists()
    return run, attribute, powered_off, root


MANIFEST_WRITE = textwrap.dedent(f"""
    mkdir -p "$ROOT{os.path.dirname(node_image.MANIFEST)}"
    printf '{{"contents": "%s"}}\\n' "$KEY" >"$ROOT{node_image.MANIFEST}"
""")


def test_a_bake_that_writes_the_manifest_reports_done_and_powers_off(tmp_path):
    run, attribute, off, root = run_startup(tmp_path, MANIFEST_WRITE)
    assert attribute.strip() == f"done {node_image.contents_key('gcp')}", run.stderr
    assert off
    for path, content in node_image.bake_files("gcp").items():
        if path != node_image.BAKE_COMMAND[0]:
            assert (root / path.lstrip("/")).read_bytes() == content


def test_a_failed_bake_reports_its_last_line_and_powers_off(tmp_path):
    run, attribute, off, _ = run_startup(tmp_path, "echo 'slurm: sha256 mismatch, refused' >&2\nexit 3\n")
    assert attribute.startswith("failed: ") and "sha256 mismatch, refused" in attribute
    assert off


def test_a_bake_without_the_manifest_is_a_failure(tmp_path):
    _, attribute, _, _ = run_startup(tmp_path, "true\n")
    assert attribute.startswith("failed: ") and "manifest" in attribute


def test_a_missing_metadata_chunk_fails_before_baking(tmp_path):
    _, attribute, off, root = run_startup(tmp_path, MANIFEST_WRITE, missing=0)
    assert attribute.startswith("failed: cannot read metadata aicluster-bake-tar-0")
    assert off and not (root / node_image.MANIFEST.lstrip("/")).exists()


def test_a_restart_after_the_bake_does_not_bake_again(tmp_path):
    run_startup(tmp_path, MANIFEST_WRITE)
    run, attribute, _, _ = run_startup(tmp_path, "echo baked-again >&2\nexit 9\n")
    assert attribute.splitlines()[-1] == f"done {node_image.contents_key('gcp')}"


# --- the wait ---------------------------------------------------------------------------------------


def fake_cloud(monkeypatch, answers: list[tuple[str, str]]):
    """Each poll takes the next (guest attribute value, instance status)."""
    polls = iter(answers)
    state = {}

    def attributes(**_):
        state["now"] = next(polls)
        values = [types.SimpleNamespace(namespace="aicluster", key="bake", value=state["now"][0])] \
            if state["now"][0] else []
        return types.SimpleNamespace(query_values=values)

    monkeypatch.setattr(gcp_image.gcp.compute, "get_instance_guest_attributes", attributes)
    monkeypatch.setattr(gcp_image.gcp.compute, "get_instance",
                        lambda **_: types.SimpleNamespace(current_status=state["now"][1]))
    monkeypatch.setattr(gcp_image, "POLL_S", 0)


def test_the_wait_returns_the_disk_once_done_and_stopped(monkeypatch):
    key = "k1"
    fake_cloud(monkeypatch, [("", "RUNNING"), (f"done {key}", "STOPPING"), (f"done {key}", "TERMINATED")])
    assert gcp_image.wait_for_bake("p", "z", "builder", "disk-link", key) == "disk-link"


def test_the_wait_raises_the_bakes_reason(monkeypatch):
    fake_cloud(monkeypatch, [("", "RUNNING"), ("failed: no space left on device", "TERMINATED")])
    with pytest.raises(RuntimeError, match="no space left on device"):
        gcp_image.wait_for_bake("p", "z", "builder", "disk-link", "k1")


def test_a_done_of_another_contents_key_is_not_this_bake(monkeypatch):
    fake_cloud(monkeypatch, [("done old", "TERMINATED"), ("done k1", "TERMINATED")])
    assert gcp_image.wait_for_bake("p", "z", "builder", "disk-link", "k1") == "disk-link"


def test_the_wait_gives_up_after_its_timeout(monkeypatch):
    fake_cloud(monkeypatch, [("", "RUNNING")] * 3)
    monkeypatch.setattr(gcp_image, "BAKE_TIMEOUT_S", -1)
    with pytest.raises(RuntimeError, match="did not finish"):
        gcp_image.wait_for_bake("p", "z", "builder", "disk-link", "k1")


def test_an_image_family_baked_before_is_booted_as_is():
    family = f"projects/{GCP_PROJECT}/global/images/family/team-node"
    planned = run_spec(spec(id=family))
    assert not planned.of_type(IMAGE)
    assert all(t.inputs["disks"][0]["sourceImage"] == family for t in planned.of_type(TEMPLATE))


def test_a_preview_never_waits_on_the_bake(monkeypatch):
    """`pulumi preview` of a stack whose builder exists knows its name: it must not poll for hours."""
    fake_cloud(monkeypatch, [])          # any poll would raise StopIteration
    monkeypatch.setattr(gcp_image.pulumi.runtime, "is_dry_run", lambda: True)
    assert gcp_image.wait_for_bake("p", "z", "builder", "disk-link", "k1") == "disk-link"
