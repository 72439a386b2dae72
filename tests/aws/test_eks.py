"""scheduler: kubernetes under mocks: the EKS cluster, its node groups and the add-ons inside it,
as the inputs each resource receives (the real program, run by the offline engine)."""
from __future__ import annotations

import copy
import ipaddress
import json

import pytest

from tests.support import BASE_SPEC, CR, FSX
from aicluster.design.kubernetes import versions

LT = "aws:ec2/launchTemplate:LaunchTemplate"
PG = "aws:ec2/placementGroup:PlacementGroup"
CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
RELEASE = "kubernetes:helm.sh/v3:Release"
SUBNET = "aws:ec2/subnet:Subnet"
ROLE = "aws:iam/role:Role"
ATTACH = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def eks_spec(**kubernetes) -> dict:
    """EKS needs a way to its API: the named CIDRs, else `pulumi up` from inside the VPC."""
    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "endpoint" if kubernetes.get("api_access_cidrs") else "vpc", **kubernetes}
    return spec


@pytest.fixture(scope="module")
def plan():
    from tests.support import run_spec

    return run_spec(eks_spec())


def gpu_group(plan, pool="gpu"):
    return plan.named(f"demo-{pool}-eks-nodegroup", NODE_GROUP)


def template(plan, pool="gpu"):
    return plan.named(f"demo-{pool}-template", LT)


def test_cluster_runs_the_pinned_version_behind_a_private_endpoint(plan):
    (cluster,) = plan.of_type(CLUSTER)
    i = cluster.inputs
    assert i["version"] == versions().kubernetes == "1.35"
    assert i["vpcConfig"]["endpointPrivateAccess"] is True
    assert i["vpcConfig"]["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in i["vpcConfig"]
    assert i["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}
    assert i["bootstrapSelfManagedAddons"] is False
    assert cluster.protect and cluster.retain_on_delete
    assert i["tags"]["aicluster-role"] == "control-plane"
    # Two control-plane subnets in two zones, in the VPC's last quarter.
    zones = set()
    for sid in i["vpcConfig"]["subnetIds"]:
        subnet = next(s for s in plan.of_type(SUBNET) if s.id == sid)
        zones.add(subnet.inputs["availabilityZone"])
        assert ipaddress.ip_network(subnet.inputs["cidrBlock"]).subnet_of(ipaddress.ip_network("10.0.192.0/18"))
    assert zones == {"us-east-1a", "us-east-1b"}


def test_public_endpoint_only_for_the_named_cidrs(plan_spec):
    plan = plan_spec(eks_spec(api_access_cidrs=["198.51.100.0/24", "203.0.113.7"]))
    vpc = plan.of_type(CLUSTER)[0].inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True and vpc["endpointPrivateAccess"] is True
    assert vpc["publicAccessCidrs"] == ["198.51.100.0/24", "203.0.113.7/32"]


def test_admins_get_cluster_admin_through_access_entries(plan_spec):
    arn = "arn:aws:iam::123456789012:role/ml-admins"
    plan = plan_spec(eks_spec(admins=[arn]))
    (entry,) = plan.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["principalArn"] == arn and entry.inputs["type"] == "STANDARD"
    (assoc,) = plan.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert assoc.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert assoc.inputs["accessScope"] == {"type": "cluster"}
    assert entry.urn in assoc.dependencies


def test_managed_addons_are_pinned_and_installed_once(plan):
    addons = {a.inputs["addonName"]: a.inputs["addonVersion"] for a in plan.of_type(ADDON)}
    assert len(plan.of_type(ADDON)) == len(addons) == len(versions().addons)
    assert addons == dict(versions().addons)


def test_vpc_cni_uses_pod_identity_not_the_node_role(plan):
    cni = next(a for a in plan.of_type(ADDON) if a.inputs["addonName"] == "vpc-cni")
    (assoc,) = cni.inputs["podIdentityAssociations"]
    assert assoc["serviceAccount"] == "aws-node"
    role = next(r for r in plan.of_type(ROLE) if r.outputs["arn"] == assoc["roleArn"])
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    policies = {a.inputs["policyArn"].rsplit("/", 1)[1]: a.inputs["role"] for a in plan.of_type(ATTACH)}
    assert policies["AmazonEKS_CNI_Policy"] == role.outputs["name"]
    node_role = plan.named("demo-compute-role", ROLE).outputs["name"]
    node_policies = {p for p, r in policies.items() if r == node_role}
    assert node_policies == {"AmazonSSMManagedInstanceCore", "AmazonEKSWorkerNodePolicy",
                             "AmazonEC2ContainerRegistryPullOnly"}


def test_gpu_node_group_launches_from_the_pools_efa_template_and_placement_group(plan):
    group, lt = gpu_group(plan), template(plan)
    i = group.inputs
    assert i["launchTemplate"] == {"id": lt.id, "version": "1"}
    (pg,) = plan.of_type(PG)
    assert lt.inputs["placement"]["groupName"] == pg.outputs["name"]
    assert pg.inputs["strategy"] == "cluster"
    assert i["amiType"] == "AL2023_x86_64_NVIDIA"
    assert "instanceTypes" not in i and lt.inputs["instanceType"] == "p5.48xlarge"
    assert i["capacityType"] == "ON_DEMAND"
    assert i["scalingConfig"] == {"minSize": 0, "maxSize": 16, "desiredSize": 0}
    assert "scalingConfig.desiredSize" in group.ignore_changes
    assert i["subnetIds"] == [plan.named("demo-network-private", SUBNET).id]
    # The template: every EFA device, IMDSv2 with hop limit 1, no public IP, encrypted root; and
    # nothing EKS refuses in a node group's template (image, instance profile, subnet).
    nics = lt.inputs["networkInterfaces"]
    assert len(nics) == 33 and sum(n["interfaceType"] == "efa-only" for n in nics) == 32
    assert all(n["associatePublicIpAddress"] == "false" and "subnetId" not in n for n in nics)
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
    assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = lt.inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda" and root["ebs"]["encrypted"] == "true"
    assert "imageId" not in lt.inputs and "iamInstanceProfile" not in lt.inputs


def test_gpu_interfaces_carry_the_efa_group_and_the_cluster_security_group(plan):
    cluster_sg = plan.of_type(CLUSTER)[0].outputs["vpcConfig"]["clusterSecurityGroupId"]
    nodes_sg = plan.named("demo-network-nodes", "aws:ec2/securityGroup:SecurityGroup").id
    for nic in template(plan).inputs["networkInterfaces"]:
        assert nic["securityGroups"] == [nodes_sg, cluster_sg]


def test_gpu_nodes_are_tainted_and_labelled(plan):
    i = gpu_group(plan).inputs
    assert i["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert i["labels"] == {"aicluster.io/pool": "gpu", "aicluster.io/instance-type": "p5.48xlarge",
                           "aicluster.io/accelerator": "h100", "nvidia.com/gpu.present": "true",
                           "vpc.amazonaws.com/efa.present": "true"}
    assert i["tags"]["aicluster-pool"] == "gpu" and i["tags"]["aicluster-role"] == "compute"


def test_node_groups_wait_for_the_networking_addons(plan):
    before = {a.urn for a in plan.of_type(ADDON) if a.inputs["addonName"] in ("vpc-cni", "kube-proxy",
                                                                            "eks-pod-identity-agent")}
    for group in plan.of_type(NODE_GROUP):
        assert before <= set(group.dependencies), group.name
    coredns = next(a for a in plan.of_type(ADDON) if a.inputs["addonName"] == "coredns")
    assert plan.named("demo-eks-system", NODE_GROUP).urn in coredns.dependencies


def test_system_node_group_runs_the_addon_controllers(plan):
    group = plan.named("demo-eks-system", NODE_GROUP)
    i = group.inputs
    assert i["instanceTypes"] == ["m7i.xlarge"] and i["amiType"] == "AL2023_x86_64_STANDARD"
    assert i["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert i["labels"] == {"aicluster.io/role": "system"} and "taints" not in i
    lt = plan.named("demo-eks-system-template", LT)
    assert i["launchTemplate"]["id"] == lt.id
    assert lt.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 1,
                                            "httpTokens": "required"}
    assert lt.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"


def test_capacity_block_keeps_the_instance_type_on_the_template_only(plan_spec):
    spec = eks_spec()
    spec["pools"][0]["capacity"] = {"type": "capacity-block", "reservation_id": CR}
    plan = plan_spec(spec)
    i, lt = gpu_group(plan).inputs, template(plan).inputs
    assert i["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in i
    assert lt["instanceType"] == "p5.48xlarge"
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"] == {"capacityReservationId": CR}
    assert plan.of_type(PG) == []   # the block fixes the placement


def test_spot_is_the_node_groups_capacity_type_not_a_template_market_option(plan_spec):
    spec = eks_spec()
    spec["pools"][0]["capacity"] = "spot"
    plan = plan_spec(spec)
    assert gpu_group(plan).inputs["capacityType"] == "SPOT"
    lt = template(plan).inputs
    assert "instanceMarketOptions" not in lt and "capacityReservationSpecification" not in lt


def test_one_node_group_per_pool(plan_spec):
    spec = eks_spec()
    spec["pools"].append({"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 2, "min_nodes": 1})
    plan = plan_spec(spec)
    groups = {g.inputs["nodeGroupName"]: g for g in plan.of_type(NODE_GROUP)}
    assert set(groups) == {"demo-system", "demo-gpu", "demo-a100"}
    a100 = groups["demo-a100"].inputs
    assert a100["launchTemplate"]["id"] == template(plan, "a100").id
    assert a100["scalingConfig"] == {"minSize": 1, "maxSize": 2, "desiredSize": 1}
    assert sum(n["interfaceType"] == "efa-only" for n in template(plan, "a100").inputs["networkInterfaces"]) == 4


def releases(plan) -> dict[str, dict]:
    found = {}
    for r in plan.of_type(RELEASE):
        assert r.inputs["name"] not in found, f"{r.inputs['name']} installed twice"
        found[r.inputs["name"]] = r.inputs
    return found


def test_addons_are_installed_once_each_at_pinned_versions(plan):
    charts = versions().charts
    installed = releases(plan)
    # karpenter: the pool scales from 0 to 16 nodes (aicluster.kubernetes.capacity)
    assert set(installed) == {"nvidia-device-plugin", "aws-efa-k8s-device-plugin", "aws-fsx-csi-driver", "kueue", "jobset",
                              "karpenter"}
    for name, release in installed.items():
        assert release["version"] == charts[name].version
        assert release["namespace"] == charts[name].namespace
        if charts[name].repo.startswith("oci://"):
            assert release["chart"] == f"{charts[name].repo}/{charts[name].chart}"
        else:
            assert release["repositoryOpts"] == {"repo": charts[name].repo}
    provider = plan.of_type("pulumi:providers:kubernetes")
    assert len(provider) == 1
    for r in plan.resources:
        if r.type.startswith("kubernetes:"):
            assert r.provider and r.provider.startswith(provider[0].urn), r.name   # never the ambient kubeconfig


@pytest.mark.parametrize("choice, other", [("nvidia-device-plugin", "gpu-operator"),
                                           ("gpu-operator", "nvidia-device-plugin")])
def test_gpu_operator_and_device_plugin_are_never_both_installed(plan_spec, choice, other):
    installed = releases(plan_spec(eks_spec(gpu_devices=choice)))
    assert choice in installed and other not in installed
    if choice == "gpu-operator":
        values = installed[choice]["values"]
        # The EKS AL2023 NVIDIA AMI ships the driver and toolkit.
        assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}


def test_efa_device_plugin_tolerates_the_gpu_taint_and_runs_only_on_efa_nodes(plan):
    values = releases(plan)["aws-efa-k8s-device-plugin"]["values"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    assert values["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert gpu_group(plan).inputs["labels"]["vpc.amazonaws.com/efa.present"] == "true"


def test_pools_without_efa_get_no_efa_plugin(plan_spec):
    spec = eks_spec()
    spec["pools"][0] = {"name": "gpu", "instance_type": "g6e.48xlarge", "max_nodes": 1, "efa": False}
    installed = releases(plan_spec(spec))
    assert "aws-efa-k8s-device-plugin" not in installed and "nvidia-device-plugin" in installed


def test_fsx_static_volume_points_at_the_filesystem_and_keeps_it(plan):
    fs = plan.named("demo-fsx-fs", "aws:fsx/lustreFileSystem:LustreFileSystem")
    pv = plan.named("demo-k8s-fsx-pv", "kubernetes:core/v1:PersistentVolume").inputs
    assert pv["spec"]["csi"] == {"driver": "fsx.csi.aws.com", "volumeHandle": fs.id, "volumeAttributes": {
        "dnsname": fs.outputs["dnsName"], "mountname": fs.outputs["mountName"]}}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["capacity"] == {"storage": "24000Gi"} and pv["spec"]["accessModes"] == ["ReadWriteMany"]
    pvc = plan.named("demo-k8s-fsx-pvc", "kubernetes:core/v1:PersistentVolumeClaim").inputs
    assert pvc["metadata"]["namespace"] == "training"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] and pvc["spec"]["storageClassName"] == ""
    values = releases(plan)["aws-fsx-csi-driver"]["values"]
    assert values["node"]["region"] == values["controller"]["region"] == "us-east-1"   # no IMDS needed


def test_one_volume_and_claim_per_filesystem(plan_spec):
    spec = eks_spec()
    spec["storage"].append({**FSX, "name": "scratch", "mount": "/scratch", "deployment_type": "SCRATCH_2"})
    plan = plan_spec(spec)
    claims = {c.inputs["metadata"]["name"] for c in plan.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert claims == {"fsx", "scratch"}
    assert len(plan.of_type("kubernetes:core/v1:PersistentVolume")) == 2


def test_kubeconfig_holds_no_credential(plan):
    provider = plan.of_type("pulumi:providers:kubernetes")[0]
    config = json.loads(provider.inputs["kubeconfig"])
    (user,) = config["users"]
    assert user["user"]["exec"]["command"] == "aws"
    assert user["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "demo"]
    assert "token" not in json.dumps(user["user"]).replace("get-token", "")
    cluster = plan.of_type(CLUSTER)[0]
    assert config["clusters"][0]["cluster"]["server"] == cluster.outputs["endpoint"]
    assert plan.outputs["kubeconfig"] == provider.inputs["kubeconfig"]


def test_slurm_stacks_get_no_kubernetes(plan_spec, base_spec):
    plan = plan_spec(base_spec)
    assert not [r for r in plan.resources if r.type.startswith(("kubernetes:", "aws:eks/", "pulumi:providers:k"))]
    lt = template(plan).inputs
    assert lt["imageId"].startswith("resolve:ssm:") and "iamInstanceProfile" in lt


def test_fake_cloud_answers_like_eks_and_the_api_server(plan):
    import base64

    cluster = plan.of_type(CLUSTER)[0].outputs
    assert cluster["endpoint"].startswith("https://") and cluster["endpoint"].endswith(".eks.amazonaws.com")
    assert base64.b64decode(cluster["certificateAuthority"]["data"]).startswith(b"-----BEGIN CERTIFICATE-----")
    pvc = plan.named("demo-k8s-fsx-pvc", "kubernetes:core/v1:PersistentVolumeClaim")
    assert pvc.id == "training/fsx" and pvc.outputs["status"]["phase"] == "Bound"
    assert pvc.outputs["metadata"]["uid"] and pvc.outputs["metadata"]["namespace"] == "training"
    kueue = next(r for r in plan.of_type(RELEASE) if r.inputs["name"] == "kueue")
    assert kueue.id == "kueue-system/kueue"
    assert kueue.outputs["status"] == {"name": "kueue", "namespace": "kueue-system", "chart": "kueue",
                                       "version": versions().charts["kueue"].version, "revision": 1,
                                       "status": "deployed"}
