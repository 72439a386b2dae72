"""GKE under Pulumi mocks (the real program, offline): the inputs each resource receives.

Per GPU machine family: the node pool carries every GPU NIC network as an additional node network
(checked against the networks and subnets the plan itself creates, and the NIC counts in the
catalog), the GKENetworkParamSet / Network objects match those networks one to one, compact
placement is single-zone, and the worker pods attach the GPU NIC networks. TPU pools: node pools of
the slice's hosts with COMPACT placement and the topology. The control plane, the NCCL installers,
Kueue's quotas and the plan report."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from aicluster.catalog import load_catalog
from aicluster.design.kubernetes import versions
from aicluster.offline.capture import reveal
from aicluster.commands.planner import rendered_files
from tests.support import GCP_MIN, GCP_PROJECT
from tests.support.manifests import example_jobset, worker_pod

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
K8S_NETWORK = "kubernetes:networking.gke.io/v1:Network"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
GCP = load_catalog().instance_types["gcp"]
FAMILIES = ["a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a2-highgpu-8g"]


def gke_spec(*pools, **top) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update({"scheduler": "kubernetes", "pools": list(pools), **top})
    return spec


def gpu_pool(machine, **extra) -> dict:
    return {"name": "gpu", "instance_type": machine, "max_nodes": 4, **extra}


@pytest.fixture(scope="module")
def family_plans():
    from tests.support import run_spec

    return {m: run_spec(gke_spec(gpu_pool(m), storage=[{"name": "scratch", "type": "lustre", "mount": "/lustre",
                                                        "capacity_gib": 18000}]))
            for m in FAMILIES}


def gpu_node_pool(plan):
    (pool,) = [p for p in plan.of_type(NODE_POOL) if p.inputs["name"] == "gpu"]
    return pool.inputs


# --- GPU node pools: every extra network, one to one with the Kubernetes objects ------------------


@pytest.mark.parametrize("machine", FAMILIES)
def test_node_pool_carries_every_gpu_nic_network(family_plans, machine):
    plan = family_plans[machine]
    extra = (gpu_node_pool(plan)["networkConfig"].get("additionalNodeNetworkConfigs") or [])
    itype = GCP[machine]
    # Every NIC of the machine type but the node's own: the extra gVNIC networks and the GPU NICs.
    assert len(extra) == itype.host_nics - 1 + itype.gpu_nics
    subnets = {r.inputs["name"]: r for r in plan.of_type(SUBNET)}
    networks = {r.id: r.inputs["name"] for r in plan.of_type(NETWORK)}
    system = {r.inputs["name"] for r in plan.of_type(NETWORK) if r.name.endswith("-network-vpc")}
    fabric_subnets = {name for name, s in subnets.items() if networks[s.inputs["network"]] not in system}
    # Each fabric subnet exactly once, on the network it belongs to.
    assert sorted(e["subnetwork"] for e in extra) == sorted(fabric_subnets)
    for e in extra:
        assert networks[subnets[e["subnetwork"]].inputs["network"]] == e["network"]
    if itype.gpu_nic_stack == "rdma":
        roce = [r.inputs["name"] for r in plan.of_type(NETWORK) if r.inputs.get("networkProfile")]
        assert sum(e["network"] in roce for e in extra) == itype.gpu_nics == 8


@pytest.mark.parametrize("machine", FAMILIES)
def test_param_sets_and_networks_match_the_node_networks_one_to_one(family_plans, machine):
    plan = family_plans[machine]
    extra = gpu_node_pool(plan)["networkConfig"].get("additionalNodeNetworkConfigs") or []
    param_sets = [reveal(r.inputs) for r in plan.of_type(PARAM_SET)]
    k8s_networks = [reveal(r.inputs) for r in plan.of_type(K8S_NETWORK)]
    assert sorted((p["spec"]["vpc"], p["spec"]["vpcSubnet"]) for p in param_sets) == \
        sorted((e["network"], e["subnetwork"]) for e in extra)
    roce = {r.inputs["name"] for r in plan.of_type(NETWORK) if r.inputs.get("networkProfile")}
    for p in param_sets:
        assert p["spec"]["deviceMode"] == ("RDMA" if p["spec"]["vpc"] in roce else "NetDevice")
        assert len(p["metadata"]["name"]) <= 41
    assert sorted(n["metadata"]["name"] for n in k8s_networks) == sorted(p["metadata"]["name"] for p in param_sets)
    for n in k8s_networks:
        assert n["spec"] == {"type": "Device", "parametersRef": {
            "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": n["metadata"]["name"]}}
    # Objects exist for networks and nothing else: RDMA for every MRDMA NIC, NetDevice for every gVNIC.
    modes = [p["spec"]["deviceMode"] for p in param_sets]
    assert modes.count("RDMA") == (GCP[machine].gpu_nics if GCP[machine].gpu_nic_stack == "rdma" else 0)


@pytest.mark.parametrize("machine", FAMILIES)
def test_compact_placement_in_a_single_zone(family_plans, machine):
    pool = gpu_node_pool(family_plans[machine])
    assert pool["nodeLocations"] == [GCP_MIN["zone"]]
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert pool["autoscaling"]["minNodeCount"] == 0 and pool["autoscaling"]["maxNodeCount"] == 4
    config = pool["nodeConfig"]
    assert config["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    (accelerator,) = config["guestAccelerators"]
    assert accelerator["count"] == GCP[machine].accelerator_count
    assert accelerator["type"] == versions().gke.accelerators[machine]
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": versions().gke.gpu_driver_version}
    assert config["gvnic"] == {"enabled": True} and config["imageType"] == "COS_CONTAINERD"
    assert pool["networkConfig"]["enablePrivateNodes"] is True
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in config["taints"]


@pytest.mark.parametrize("capacity, affinity, placement", [
    ({"type": "reservation", "reservation_id": "a3u-res"},
     {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
      "values": ["a3u-res"]}, None),
    ("spot", {"consumeReservationType": "NO_RESERVATION"}, {"type": "COMPACT"}),
])
def test_capacity_sets_reservation_affinity_and_a_reservation_brings_its_placement(plan_spec, capacity, affinity,
                                                                                   placement):
    plan = plan_spec(gke_spec(gpu_pool("a3-ultragpu-8g", capacity=capacity)))
    pool = gpu_node_pool(plan)
    assert pool["nodeConfig"]["reservationAffinity"] == affinity
    assert pool.get("placementPolicy") == placement
    assert pool["nodeConfig"].get("spot") is (True if capacity == "spot" else None)


def test_single_node_pool_has_no_compact_placement(plan_spec):
    assert "placementPolicy" not in gpu_node_pool(plan_spec(gke_spec(gpu_pool("a3-megagpu-8g", max_nodes=1))))


@pytest.mark.parametrize("machine, interfaces", [
    ("a3-megagpu-8g", [("eth0", "default")] + [(f"eth{i}", f"tcpxo-{i}") for i in range(1, 9)]),
    ("a3-ultragpu-8g", [("eth0", "default")] + [(f"eth{i + 2}", f"rdma-{i}") for i in range(8)]),
    ("a3-highgpu-8g", [("eth0", "default")] + [(f"eth{i}", f"tcpx-{i}") for i in range(1, 5)]),
])
def test_gpu_job_attaches_every_gpu_nic_network(family_plans, machine, interfaces):
    files = rendered_files(family_plans[machine])
    jobset = example_jobset([d for d in yaml.safe_load_all(files["k8s/examples/train-gpu.yaml"]) if d])
    annotations = worker_pod(jobset)["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    attached = [(i["interfaceName"], i["network"]) for i in json.loads(annotations["networking.gke.io/interfaces"])]
    assert attached == interfaces
    # Every network a pod attaches exists as a Network object.
    objects = {reveal(r.inputs)["metadata"]["name"] for r in family_plans[machine].of_type(K8S_NETWORK)}
    assert {net for _, net in attached[1:]} <= objects
    pod = worker_pod(jobset)["spec"]
    stack = GCP[machine].gpu_nic_stack
    if stack in ("tcpx", "tcpxo"):      # the receive-datapath manager runs as a native sidecar
        (sidecar,) = pod["initContainers"]
        assert sidecar["restartPolicy"] == "Always" and sidecar["name"] == f"{stack}-daemon"
        assert sidecar["image"] == versions().nccl_installers[stack].rxdm_image
        assert f"devices.gke.io/container.{stack}-daemon" in annotations
    else:
        assert "initContainers" not in pod
        assert "source /usr/local/gib/scripts/set_nccl_env.sh" in pod["containers"][0]["args"][0]


@pytest.mark.parametrize("machine", FAMILIES)
def test_nccl_installer_of_the_family_at_its_pinned_version(family_plans, machine):
    # Every GPU pool also runs the health agent's DaemonSet (tests/k8s/test_node_health_manifests.py)
    # and the metrics exporters' in `monitoring` (tests/observability/test_k8s_metrics.py).
    installers = [d for d in family_plans[machine].of_type(DAEMONSET)
                  if not (reveal(d.inputs).get("metadata") or {}).get("name", "").startswith("aicluster-node-health")
                  and (reveal(d.inputs).get("metadata") or {}).get("namespace") != "monitoring"]
    stack = GCP[machine].gpu_nic_stack
    if stack == "none":
        assert installers == []
        return
    (ds,) = installers
    spec = reveal(ds.inputs)["spec"]["template"]["spec"]
    images = [c["image"] for c in spec["initContainers"]]
    assert versions().nccl_installers[stack].image in images
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [versions().gke.accelerators[machine]]
    assert {"operator": "Exists"} in spec["tolerations"]


# --- the control plane --------------------------------------------------------------------------


def test_cluster_is_private_multi_network_and_pinned(family_plans):
    plan = family_plans["a3-ultragpu-8g"]
    (cluster,) = plan.of_type(CLUSTER)
    c = cluster.inputs
    v = versions().gke
    assert c["datapathProvider"] == "ADVANCED_DATAPATH" and c["enableMultiNetworking"] is True
    assert c["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert c["masterAuthorizedNetworksConfig"].get("cidrBlocks", []) == []
    assert c["workloadIdentityConfig"] == {"workloadPool": f"{GCP_PROJECT}.svc.id.goog"}
    assert c["releaseChannel"] == {"channel": v.release_channel} and c["minMasterVersion"] == v.version
    assert c["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True}
    assert c["location"] == GCP_MIN["region"] and c["nodeLocations"] == [GCP_MIN["zone"]]
    assert c["deletionProtection"] is True and c["removeDefaultNodePool"] is True
    assert cluster.protect and cluster.retain_on_delete
    # The IP endpoint is private; the Kubernetes provider of `pulumi up` talks to the DNS-based
    # endpoint, authorized by IAM (tests/gcp/test_gke_api_access.py); no token anywhere.
    assert c["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    (provider,) = [r for r in plan.resources if r.type == "pulumi:providers:kubernetes"]
    kubeconfig = json.loads(reveal(provider.inputs["kubeconfig"]))
    dns = cluster.outputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["endpoint"]
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://{dns}"
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_api_access_cidrs_open_a_public_endpoint_for_them_only(plan_spec):
    plan = plan_spec(gke_spec(gpu_pool("a3-megagpu-8g"), kubernetes={"api_access_cidrs": ["203.0.113.0/24"]}))
    (cluster,) = plan.of_type(CLUSTER)
    assert cluster.inputs["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert cluster.inputs["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "kubernetes.api_access_cidrs"}],
        "gcpPublicCidrsAccessEnabled": False}


def test_nodes_run_as_the_compute_account_with_gke_node_role(family_plans):
    plan = family_plans["a3-megagpu-8g"]
    (account,) = plan.of_type("gcp:serviceaccount/account:Account")
    for pool in plan.of_type(NODE_POOL):
        config = pool.inputs["nodeConfig"]
        assert config["serviceAccount"] == account.outputs["email"]
        assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert config["shieldedInstanceConfig"]["enableSecureBoot"] is True
    roles = {m.inputs["role"] for m in plan.of_type("gcp:projects/iAMMember:IAMMember")
             if m.inputs["member"] == account.outputs["member"]}
    assert "roles/container.defaultNodeServiceAccount" in roles


def test_lustre_is_a_static_volume_of_the_gke_csi_driver(family_plans):
    plan = family_plans["a3-ultragpu-8g"]
    (fs,) = plan.of_type("gcp:lustre/instance:Instance")
    (pv,) = plan.of_type("kubernetes:core/v1:PersistentVolume")
    csi = reveal(pv.inputs)["spec"]["csi"]
    ip, fsname = fs.outputs["mountPoint"].split("@tcp:/")
    assert csi == {"driver": "lustre.csi.storage.gke.io",
                   "volumeHandle": f"{GCP_PROJECT}/{GCP_MIN['zone']}/{fs.inputs['instanceId']}",
                   "volumeAttributes": {"ip": ip, "filesystem": fsname}}
    assert reveal(pv.inputs)["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert fs.inputs["gkeSupportEnabled"] is False      # GKE nodes from 1.33.2-gke.4655000 need no legacy port


# --- TPU ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gen, topology, hosts, machine", [
    ("v5p", "2x2x2", 2, "ct5p-hightpu-4t"), ("v5p", "4x4x4", 16, "ct5p-hightpu-4t"),
    ("v5e", "4x8", 8, "ct5lp-hightpu-4t"), ("v6e", "8x8", 16, "ct6e-standard-4t"),
])
def test_tpu_node_pool_is_the_slice(plan_spec, gen, topology, hosts, machine):
    spec = gke_spec({"name": "tpu", "tpu": {"type": gen, "topology": topology}, "max_nodes": hosts})
    plan = plan_spec(spec)
    (pool,) = [p.inputs for p in plan.of_type(NODE_POOL) if p.inputs["name"] == "tpu"]
    assert pool["nodeConfig"]["machineType"] == machine
    assert pool["placementPolicy"] == {"type": "COMPACT", "tpuTopology": topology}
    assert pool["nodeLocations"] == [GCP_MIN["zone"]]
    assert pool["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": hosts}
    assert "guestAccelerators" not in pool["nodeConfig"]
    assert {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"} in pool["nodeConfig"]["taints"]
    (queue,) = plan.of_type(CQ)
    (group,) = queue.inputs["spec"]["resourceGroups"]
    chips = 1
    for d in topology.split("x"):
        chips *= int(d)
    assert group == {"coveredResources": ["google.com/tpu"], "flavors": [
        {"name": "tpu", "resources": [{"name": "google.com/tpu", "nominalQuota": str(chips)}]}]}
    jobset = yaml.safe_load(rendered_files(plan)["k8s/examples/train-tpu.yaml"])
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1 and replicated["template"]["spec"]["parallelism"] == hosts
    selector = replicated["template"]["spec"]["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-tpu-topology"] == topology
    assert selector["cloud.google.com/gke-tpu-accelerator"] == load_catalog().tpus[gen].gke_accelerator


def test_always_on_slices_have_a_fixed_size(plan_spec):
    spec = gke_spec({"name": "tpu", "tpu": {"type": "v5p", "topology": "2x2x2"}, "max_nodes": 4, "min_nodes": 2})
    pools = {p.inputs["name"]: p.inputs for p in plan_spec(spec).of_type(NODE_POOL) if p.inputs["name"] != "system"}
    assert pools["tpu-0"]["nodeCount"] == 2 and "autoscaling" not in pools["tpu-0"]
    assert pools["tpu-1"]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2}
    jobset = yaml.safe_load(rendered_files(plan_spec(spec))["k8s/examples/train-tpu.yaml"])
    env = {e["name"] for e in jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert {"MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID"} <= env


# --- the example stacks ---------------------------------------------------------------------------


def test_tpu_stack_shows_its_sixteen_hosts():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    out = "\n".join(text(stack_result("gcp-tpu-v5p-gke")))
    assert "TPU v5p 4x4x4: 64 chips on 16 hosts of ct5p-hightpu-4t" in out
    assert "nodes 0..16 as v5p-[1-16]" in out and "16 hosts" in out
    assert "flavor v5p: google.com/tpu 64" in out


def test_a3_ultra_stack_shows_eight_rdma_networks_on_its_gpu_node_pool():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    result = stack_result("gcp-a3ultra-gke")
    out = "\n".join(text(result))
    assert "9 additional node networks: gvnic-1 (NetDevice) + 8 RDMA networks rdma-0..rdma-7 (deviceMode RDMA)" in out
    (pool,) = [p for p in result.plan.of_type(NODE_POOL) if p.inputs["name"] == "h200"]
    roce = {r.inputs["name"] for r in result.plan.of_type(NETWORK) if r.inputs.get("networkProfile")}
    assert sum(n["network"] in roce for n in pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
