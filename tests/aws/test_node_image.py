"""aicluster:aws:NodeImage under mocks: EC2 Image Builder bakes the Slurm nodes' AMI in `pulumi up`
(slurm.node_image.build), the GPU pools and login nodes boot it, the head keeps Ubuntu; the build is
private, IMDSv2, encrypted and least privilege; the component names only the contents key, so a new
on-node archive never rebuilds the image; an image baked before (slurm.node_image.id) is booted as is."""
from __future__ import annotations

import copy
import io
import json
import stat
import subprocess
import tarfile

import pytest
import yaml

from aicluster.aws import image as aws_image
from aicluster.errors import SpecError
from aicluster.render import image_bake, node_image
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, run_spec
from tests.support.bucket_objects import as_bytes, body

LT = "aws:ec2/launchTemplate:LaunchTemplate"
COMPONENT = "aws:imagebuilder/component:Component"
RECIPE = "aws:imagebuilder/imageRecipe:ImageRecipe"
INFRA = "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration"
DISTRIBUTION = "aws:imagebuilder/distributionConfiguration:DistributionConfiguration"
IMAGE = "aws:imagebuilder/image:Image"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
SG = "aws:ec2/securityGroup:SecurityGroup"


def spec(**node_image_keys) -> dict:
    out = copy.deepcopy(BASE_SPEC)
    out["slurm"] = {"node_image": node_image_keys}
    return out


@pytest.fixture(scope="module")
def plan():
    return run_spec(spec(build=True))


def test_the_gpu_pool_and_login_nodes_boot_the_built_image_and_the_head_keeps_ubuntu(plan):
    (built,) = plan.of_type(IMAGE)
    ami = built.outputs["outputResources"][0]["amis"][0]["image"]
    assert plan.named("demo-gpu-template", LT).inputs["imageId"] == ami
    assert plan.named("demo-login-template", LT).inputs["imageId"] == ami
    assert plan.named("demo-slurm-head-template", LT).inputs["imageId"].startswith("resolve:ssm:/aws/service/canonical/")
    assert plan.outputs["node_image"] == ami


def test_the_recipe_starts_from_the_gpu_pools_own_image_on_an_encrypted_volume(plan):
    (recipe,) = plan.of_type(RECIPE)
    i = recipe.inputs
    assert i["parentImage"] == "ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
    (mapping,) = i["blockDeviceMappings"]
    assert mapping["deviceName"] == "/dev/sda1"
    assert mapping["ebs"]["encrypted"] == "true" and mapping["ebs"]["volumeSize"] >= 100
    assert node_image.contents_key("aws") in i["name"]


def test_the_builder_is_private_imdsv2_and_ends_on_failure(plan):
    (infra,) = plan.of_type(INFRA)
    i = infra.inputs
    assert i["instanceMetadataOptions"] == {"httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert i["subnetId"] == plan.named("demo-network-private", "aws:ec2/subnet:Subnet").id
    assert i["terminateInstanceOnFailure"] is True
    (group_id,) = i["securityGroupIds"]
    (group,) = [g for g in plan.of_type(SG) if g.id == group_id]
    assert not group.inputs.get("ingress") and group.inputs["egress"]


def test_the_builder_role_reads_only_its_bake_files_and_writes_only_logs(plan):
    key = node_image.contents_key("aws")
    (policy,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "demo-node-image-builder-files"]
    statements = json.loads(policy.inputs["policy"])["Statement"]
    bucket = plan.outputs["slurm_config_bucket"]
    assert {(s["Action"], s["Resource"]) for s in statements} == {
        ("s3:GetObject", f"arn:aws:s3:::{bucket}/image/{key}/*"), ("s3:PutObject", f"arn:aws:s3:::{bucket}/image-logs/*")}
    managed = {r.inputs["policyArn"] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
               if r.name.startswith("demo-node-image-builder-")}
    assert managed == {"arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder",
                       "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"}


def test_the_component_downloads_the_bake_tar_unpacks_it_and_checks_the_manifest(plan):
    key = node_image.contents_key("aws")
    (component,) = plan.of_type(COMPONENT)
    document = yaml.safe_load(component.inputs["data"])          # AWSTOE reads YAML; JSON is YAML
    build, validate = document["phases"]
    download, bake = build["steps"]
    bucket = plan.outputs["slurm_config_bucket"]
    assert download["action"] == "S3Download"
    assert download["inputs"] == [{"source": f"s3://{bucket}/image/{key}/bake.tar", "destination": image_bake.TAR_PATH}]
    assert bake["action"] == "ExecuteBash" and bake["inputs"]["commands"][1:] == image_bake.bake_lines("aws")
    assert key in validate["steps"][0]["inputs"]["commands"][0] and node_image.MANIFEST in \
        validate["steps"][0]["inputs"]["commands"][0]
    (tar_object,) = [o for o in plan.of_type(OBJECT) if o.inputs["key"] == f"image/{key}/bake.tar"]
    assert as_bytes(body(tar_object)) == image_bake.bake_tar("aws")
    assert tar_object.inputs["serverSideEncryption"] == "AES256"


def test_the_ami_is_private_and_named_with_its_contents_and_build_date(plan):
    key = node_image.contents_key("aws")
    (distribution,) = plan.of_type(DISTRIBUTION)
    (target,) = distribution.inputs["distributions"]
    ami = target["amiDistributionConfiguration"]
    assert "{{ imagebuilder:buildDate }}" in ami["name"] and key in ami["name"]
    assert ami["amiTags"]["aicluster-image-contents"] == key
    assert "launchPermission" not in ami


def test_a_new_node_archive_changes_the_tar_but_not_the_component(monkeypatch):
    """Nodes fetch the cluster's current archive at boot: a code change must not rebuild the image."""
    before_doc, before_tar = aws_image.component_document("bucket", "k"), image_bake.bake_tar("aws")
    files = dict(node_image.bake_files("aws"))
    archive = next(path for path in files if path.endswith(".pyz"))
    files[archive.replace(".pyz", "0.pyz")] = files.pop(archive) + b"changed"
    monkeypatch.setattr(node_image, "bake_files", lambda cloud: files)
    assert aws_image.component_document("bucket", "k") == before_doc
    assert image_bake.bake_tar("aws") != before_tar


def test_the_bake_tar_is_deterministic_and_unpacks_every_file_with_its_mode(tmp_path):
    data = image_bake.bake_tar("aws")
    assert data == image_bake.bake_tar("aws")
    tar_path = tmp_path / "bake.tar"
    tar_path.write_bytes(data)
    root = tmp_path / "root"
    root.mkdir()
    unpack = image_bake.bake_lines("aws", str(tar_path), str(root))[0]
    subprocess.run(["bash", "-ec", unpack], check=True)
    for path, content in node_image.bake_files("aws").items():
        written = root / path.lstrip("/")
        assert written.read_bytes() == content
        executable = bool(written.stat().st_mode & stat.S_IXUSR)
        assert executable == ("/bin/" in path or content[:2] == b"#!"), path
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert all(m.mtime == 0 and m.uid == 0 and not m.name.startswith("/") for m in tar.getmembers())


def test_an_image_baked_before_is_booted_as_is_with_nothing_built():
    planned = run_spec(spec(id="ami-0123456789abcdef0"))
    assert not [r for r in planned.resources if r.type.startswith("aws:imagebuilder/")]
    assert planned.named("demo-gpu-template", LT).inputs["imageId"] == "ami-0123456789abcdef0"
    assert planned.named("demo-login-template", LT).inputs["imageId"] == "ami-0123456789abcdef0"


def test_without_node_image_nothing_changes():
    planned = run_spec(copy.deepcopy(BASE_SPEC))
    assert not [r for r in planned.resources if r.type.startswith("aws:imagebuilder/")]
    assert planned.named("demo-gpu-template", LT).inputs["imageId"].startswith("resolve:ssm:/aws/service/deeplearning/")
    assert "node_image" not in planned.outputs


@pytest.mark.parametrize("keys, path", [
    ({"build": True, "id": "ami-0123456789abcdef0"}, "slurm.node_image.id"),
    ({"id": "projects/x/global/images/y"}, "slurm.node_image.id"),
])
def test_bad_node_image_settings_name_their_path(keys, path):
    with pytest.raises(SpecError) as err:
        parse_spec(spec(**keys))
    assert path in str(err.value)


def test_a_pool_whose_root_volume_cannot_hold_the_image_is_refused():
    data = spec(build=True)
    data["pools"][0]["root_volume_gib"] = 80
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert "pools[0].root_volume_gib" in str(err.value) and "80" in str(err.value)


def test_more_tags_than_image_builder_takes_are_refused_with_the_budget():
    data = spec(build=True)
    data["tags"] = {f"k{i}": "v" for i in range(28)}
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert "tags" in str(err.value) and "at most 27" in str(err.value)
    data["tags"] = {f"k{i}": "v" for i in range(27)}
    parse_spec(data)


def _user_data(resource) -> str:
    import base64

    text = resource.inputs["userData"]
    try:
        return base64.b64decode(text, validate=True).decode()
    except ValueError:
        return text


def test_the_nodes_that_boot_the_image_name_its_contents_and_install_no_package(plan):
    key = node_image.contents_key("aws")
    gpu = _user_data(plan.named("demo-gpu-template", LT))
    assert f"AICLUSTER_IMAGE_CONTENTS={key}" in gpu
    (login,) = [r for r in plan.of_type("aws:ec2/instance:Instance") if r.name == "demo-login-1"]
    text = yaml.safe_load(_user_data(login))
    assert "packages" not in text and "package_update" not in text
    assert f"AICLUSTER_IMAGE_CONTENTS={key}" in json.dumps(text)
    assert not any("apt-mark" in json.dumps(c) for c in text["runcmd"])
    head = _user_data(plan.named("demo-slurm-head", "aws:ec2/instance:Instance"))
    assert "AICLUSTER_IMAGE_CONTENTS" not in head            # the head installs at boot


def test_without_a_baked_image_the_nodes_install_their_packages():
    planned = run_spec(copy.deepcopy(BASE_SPEC))
    assert "AICLUSTER_IMAGE_CONTENTS" not in _user_data(planned.named("demo-gpu-template", LT))
    (login,) = [r for r in planned.of_type("aws:ec2/instance:Instance") if r.name == "demo-login-1"]
    assert yaml.safe_load(_user_data(login))["packages"]
