"""The GCP components under Pulumi mocks (the real program, offline): the inputs each resource
receives. Golden NIC layouts per machine family, placement present or absent, capacity, the
network and its firewall rules, Managed Lustre and Filestore with their Mount, the Slurm head node
and the configuration it is published."""
from __future__ import annotations

import copy
import json
import re

import pytest
import yaml

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix
from aicluster.offline.capture import Secret, reveal
from aicluster.commands.planner import rendered_files
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN, GCP_PROJECT, stack_spec

TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
LUSTRE = "gcp:lustre/instance:Instance"
FILESTORE = "gcp:filestore/instance:Instance"
INSTANCE = "gcp:compute/instance:Instance"
TCPX_IMAGE = "projects/my-images/global/images/family/a3-tcpx"


def spec_with(instance_type="a3-megagpu-8g", **pool_extra):
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"][0].update(instance_type=instance_type, max_nodes=4, **pool_extra)
    if instance_type == "a3-highgpu-8g":
        spec["pools"][0].setdefault("image", TCPX_IMAGE)
    spec["storage"] = [{"name": "scratch", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000}]
    return spec


def template(plan):
    (t,) = plan.of_type(TEMPLATE)
    return t.inputs


def subnet_names(plan, t):
    by_link = {s.outputs["selfLink"]: s.inputs["name"] for s in plan.of_type(SUBNET)}
    return [by_link[n["subnetwork"]] for n in t["networkInterfaces"]]


# --- golden NIC layouts through the mocks ---------------------------------------------------------


@pytest.mark.parametrize("itype, golden", [
    ("a3-highgpu-8g", [("test-subnet", "GVNIC")] + [(f"test-tcpx-{i}-sub", "GVNIC") for i in range(1, 5)]),
    ("a3-megagpu-8g", [("test-subnet", "GVNIC")] + [(f"test-tcpxo-{i}-sub", "GVNIC") for i in range(1, 9)]),
    ("a3-ultragpu-8g", [("test-subnet", "GVNIC"), ("test-gvnic-1-sub", "GVNIC")]
     + [(f"test-rdma-sub-{i}", "MRDMA") for i in range(8)]),
    ("a4-highgpu-8g", [("test-subnet", "GVNIC"), ("test-gvnic-1-sub", "GVNIC")]
     + [(f"test-rdma-sub-{i}", "MRDMA") for i in range(8)]),
])
def test_instance_template_wires_every_nic(plan_spec, itype, golden):
    plan = plan_spec(spec_with(itype))
    t = template(plan)
    assert list(zip(subnet_names(plan, t), [n["nicType"] for n in t["networkInterfaces"]])) == golden
    assert all("accessConfigs" not in n for n in t["networkInterfaces"])         # no external IP
    assert t["machineType"] == itype


def test_rdma_vpc_takes_the_zones_roce_profile_and_eight_subnets(plan_spec):
    plan = plan_spec(spec_with("a3-ultragpu-8g"))
    nets = {n.inputs["name"]: n.inputs for n in plan.of_type(NETWORK)}
    assert nets["test-rdma"]["networkProfile"] == f"projects/{GCP_PROJECT}/global/networkProfiles/us-central1-a-vpc-roce"
    assert nets["test-rdma"]["mtu"] == 8896 and nets["test-gvnic-1"]["mtu"] == 8896 and nets["test"]["mtu"] == 8896
    assert "networkProfile" not in nets["test-gvnic-1"]
    rdma_subnets = [s.inputs for s in plan.of_type(SUBNET) if s.inputs["name"].startswith("test-rdma-sub-")]
    assert len(rdma_subnets) == 8 and {s["region"] for s in rdma_subnets} == {"us-central1"}
    firewalled = {f.inputs["network"] for f in plan.of_type(FIREWALL)}
    rdma_id = next(n.id for n in plan.of_type(NETWORK) if n.inputs["name"] == "test-rdma")
    assert rdma_id not in firewalled                                             # RoCE VPCs take no firewall rules


def test_tcpxo_vpcs_have_mtu_8244_and_internal_firewalls(plan_spec):
    plan = plan_spec(spec_with("a3-megagpu-8g"))
    nets = {n.inputs["name"]: n for n in plan.of_type(NETWORK)}
    assert {nets[f"test-tcpxo-{i}"].inputs["mtu"] for i in range(1, 9)} == {8244}
    assert nets["test"].inputs["mtu"] == 8244
    for i in range(1, 9):
        (rule,) = [f.inputs for f in plan.of_type(FIREWALL) if f.inputs["network"] == nets[f"test-tcpxo-{i}"].id]
        (sub,) = [s.inputs["ipCidrRange"] for s in plan.of_type(SUBNET) if s.inputs["name"] == f"test-tcpxo-{i}-sub"]
        assert rule["sourceRanges"] == [sub] and rule["direction"] == "INGRESS"


# --- placement and capacity ---------------------------------------------------------------------


def test_multi_node_pool_gets_a_compact_placement_policy(plan_spec):
    plan = plan_spec(spec_with())
    (policy,) = plan.of_type(POLICY)
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
    t = template(plan)
    assert t["resourcePolicies"] == policy.outputs["selfLink"]
    assert t["reservationAffinity"] == {"type": "ANY_RESERVATION"}
    assert t["scheduling"] == {"provisioningModel": "STANDARD", "automaticRestart": True,
                               "onHostMaintenance": "TERMINATE"}


def test_dense_reservation_pool_has_no_placement_policy(plan_spec):
    plan = plan_spec(spec_with("a3-ultragpu-8g", capacity={"type": "reservation", "reservation_id": "a3u-dense"}))
    assert plan.of_type(POLICY) == []
    t = template(plan)
    assert "resourcePolicies" not in t
    assert t["reservationAffinity"] == {"type": "SPECIFIC_RESERVATION", "specificReservation": {
        "key": "compute.googleapis.com/reservation-name", "values": ["a3u-dense"]}}


def test_spot_and_flex_start(plan_spec):
    spot = template(plan_spec(spec_with(capacity="spot")))
    assert spot["scheduling"] == {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                                  "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE"}
    assert spot["reservationAffinity"] == {"type": "NO_RESERVATION"}
    flex = template(plan_spec(spec_with(capacity="flex-start")))
    assert flex["scheduling"]["provisioningModel"] == "FLEX_START"
    assert flex["scheduling"]["maxRunDuration"] == {"seconds": 7 * 24 * 3600}
    assert flex["reservationAffinity"] == {"type": "NO_RESERVATION"}


def test_template_is_shielded_private_and_labelled(plan_spec):
    plan = plan_spec(spec_with())
    t = template(plan)
    assert t["shieldedInstanceConfig"] == {"enableSecureBoot": False, "enableVtpm": True,
                                           "enableIntegrityMonitoring": True}
    (disk,) = t["disks"]
    assert disk["boot"] and disk["diskType"] == "pd-ssd" and disk["diskSizeGb"] == 200
    assert disk["sourceImage"].endswith("/family/ubuntu-accelerator-2404-amd64-with-nvidia-580")
    assert t["labels"] == {"aicluster-cluster": "test", "aicluster-role": "compute", "aicluster-pool": "gpu",
                           "aicluster-min-nodes": "0", "aicluster-max-nodes": "4", "aicluster-zone": "us-central1-a"}
    assert t["metadata"]["enable-oslogin"] == "TRUE" and t["metadata"]["block-project-ssh-keys"] == "TRUE"
    assert t["serviceAccount"]["email"] == plan.named("test-compute-account",
                                                      "gcp:serviceaccount/account:Account").outputs["email"]
    assert t["tags"] == ["test-node"]


def test_user_tags_become_valid_labels(plan_spec):
    spec = spec_with()
    spec["tags"] = {"Team": "ML.Platform", "cost center": "4711"}
    labels = template(plan_spec(spec))["labels"]
    assert labels["team"] == "ml-platform" and labels["cost-center"] == "4711"


# --- network ---------------------------------------------------------------------------------


def test_system_network_has_nat_and_only_internal_rules(plan_spec):
    spec = spec_with()
    spec["network"] = {"ssh_ingress_cidrs": ["203.0.113.0/24"]}
    plan = plan_spec(spec)
    (subnet,) = [s.inputs for s in plan.of_type(SUBNET) if s.inputs["name"] == "test-subnet"]
    assert subnet["ipCidrRange"] == "10.0.0.0/17" and subnet["privateIpGoogleAccess"] is True
    (nat,) = plan.of_type("gcp:compute/routerNat:RouterNat")
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    rules = {f.inputs["name"]: f.inputs for f in plan.of_type(FIREWALL)}
    assert rules["test-internal"]["sourceTags"] == rules["test-internal"]["targetTags"] == ["test-node"]
    assert rules["test-lustre"]["sourceRanges"] == ["172.31.0.0/16"]
    assert rules["test-lustre"]["allows"] == [{"protocol": "tcp", "ports": ["988"]}]
    assert rules["test-iap-ssh"]["sourceRanges"] == ["35.235.240.0/20"]
    assert rules["test-ssh"]["sourceRanges"] == ["203.0.113.0/24"] and rules["test-ssh"]["targetTags"] == ["test-head"]
    for rule in rules.values():
        assert "0.0.0.0/0" not in rule.get("sourceRanges", [])


def test_the_nodes_subnet_keeps_flow_logs_unless_turned_off(plan_spec):
    """spec network.flow_logs (default true): the nodes' subnet logs its flows (CIS GCP 3.8)."""
    def subnet_log(spec):
        (subnet,) = [s.inputs for s in plan_spec(spec).of_type(SUBNET) if s.inputs["name"] == "test-subnet"]
        return subnet.get("logConfig")

    assert subnet_log(spec_with()) == {"aggregationInterval": "INTERVAL_5_SEC", "flowSampling": 0.5,
                                       "metadata": "INCLUDE_ALL_METADATA"}
    off = spec_with()
    off["network"] = {"flow_logs": False}
    assert subnet_log(off) is None


def test_private_service_access_for_managed_lustre(plan_spec):
    plan = plan_spec(spec_with())
    (address,) = plan.of_type("gcp:compute/globalAddress:GlobalAddress")
    assert (address.inputs["purpose"], address.inputs["addressType"], address.inputs["address"],
            address.inputs["prefixLength"]) == ("VPC_PEERING", "INTERNAL", "172.31.0.0", 16)
    (peering,) = plan.of_type("gcp:servicenetworking/connection:Connection")
    assert peering.inputs["service"] == "servicenetworking.googleapis.com"
    assert peering.inputs["reservedPeeringRanges"] == [address.outputs["name"]]
    lustre = plan.named("test-scratch-fs", LUSTRE)
    assert peering.urn in lustre.dependencies


def test_existing_network_is_used_as_is(plan_spec):
    spec = spec_with()
    spec["network"] = {"existing": {"vpc_id": "prod-vpc", "subnet_id": "projects/p/regions/us-central1/subnetworks/s"}}
    plan = plan_spec(spec)
    assert "test" not in {n.inputs["name"] for n in plan.of_type(NETWORK)}
    assert plan.of_type("gcp:servicenetworking/connection:Connection") == []
    assert template(plan)["networkInterfaces"][0]["subnetwork"] == "projects/p/regions/us-central1/subnetworks/s"
    assert plan.named("test-scratch-fs", LUSTRE).inputs["network"] == f"projects/{GCP_PROJECT}/global/networks/prod-vpc"


# --- storage -------------------------------------------------------------------------------------


def test_managed_lustre_is_sized_protected_and_mounted(plan_spec):
    spec = spec_with()
    spec["storage"][0]["throughput_mbps_per_tib"] = 250
    spec["storage"][0]["capacity_gib"] = 36000
    plan = plan_spec(spec)
    fs = plan.named("test-scratch-fs", LUSTRE)
    assert fs.inputs["capacityGib"] == "36000" and fs.inputs["perUnitStorageThroughput"] == "250"
    assert fs.inputs["location"] == "us-central1-a" and fs.inputs["filesystem"] == "scratch"
    assert fs.inputs["network"] == plan.named("test-network-vpc", NETWORK).id
    assert fs.inputs["gkeSupportEnabled"] is False
    assert fs.protect and fs.retain_on_delete
    mount = yaml.safe_load(rendered_files(plan)["user-data/test-gpu-template.yaml"])["write_files"][0]["content"]
    server = fs.outputs["mountPoint"].split("@")[0]
    assert f"mount_one '{server}@tcp:/scratch' '/lustre' 'lustre'" in mount
    assert "install_lustre_client_gcp" in mount.split("mount_one '")[-2]


def test_filestore_homes_are_protected_and_mounted_over_nfs(plan_spec):
    spec = spec_with()
    spec["storage"].append({"name": "home", "type": "filestore", "mount": "/home", "capacity_gib": 2560})
    plan = plan_spec(spec)
    fs = plan.named("test-home-fs", FILESTORE)
    assert fs.inputs["tier"] == "ZONAL" and fs.inputs["fileShares"] == {"name": "home", "capacityGb": 2560}
    assert fs.inputs["networks"] == [{"network": "test", "modes": ["MODE_IPV4"], "connectMode": "PRIVATE_SERVICE_ACCESS"}]
    assert fs.inputs["deletionProtectionEnabled"] is True and fs.protect and fs.retain_on_delete
    ip = fs.outputs["networks"][0]["ipAddresses"][0]
    mount = yaml.safe_load(rendered_files(plan)["user-data/test-gpu-template.yaml"])["write_files"][0]["content"]
    assert f"mount_one '{ip}:/home' '/home' 'nfs'" in mount and "install_nfs_client" in mount


def test_protect_false_opts_out(plan_spec):
    spec = spec_with()
    spec["storage"][0]["protect"] = False
    fs = plan_spec(spec).named("test-scratch-fs", LUSTRE)
    assert not fs.protect and not fs.retain_on_delete


def test_storage_inputs_do_not_depend_on_pools(plan_spec):
    def state(spec):
        fs = plan_spec(spec).named("test-scratch-fs", LUSTRE)
        return fs.urn, fs.inputs, fs.protect, fs.retain_on_delete, sorted(fs.dependencies)

    base = spec_with()
    before = state(base)
    for edit in ({"max_nodes": 64}, {"instance_type": "a3-ultragpu-8g"}, {"min_nodes": 2}, {"capacity": "spot"}):
        changed = copy.deepcopy(base)
        changed["pools"][0].update(edit)
        assert state(changed) == before, edit


# --- Slurm ----------------------------------------------------------------------------------------


def test_head_node_is_private_shielded_protected_and_least_privileged(plan_spec):
    plan = plan_spec(spec_with())
    head = plan.named("test-slurm-head", INSTANCE)
    i = head.inputs
    assert i["name"] == "test-head" and i["machineType"] == "n2-standard-8" and i["zone"] == "us-central1-a"
    assert "accessConfigs" not in i["networkInterfaces"][0]
    assert i["bootDisk"]["autoDelete"] is False
    assert i["bootDisk"]["initializeParams"]["image"].endswith("/family/ubuntu-2404-lts-amd64")
    assert i["deletionProtection"] is True and head.protect and head.retain_on_delete
    assert i["shieldedInstanceConfig"]["enableSecureBoot"] is True
    assert i["tags"] == ["test-node", "test-head"]
    head_sa = plan.named("test-slurm-head-account", "gcp:serviceaccount/account:Account")
    assert i["serviceAccount"]["email"] == head_sa.outputs["email"]
    roles = {m.inputs["role"] for m in plan.of_type("gcp:projects/iAMMember:IAMMember")
             if m.inputs["member"] == head_sa.outputs["member"]}
    role = plan.named("test-slurm-config-head-role", "gcp:projects/iAMCustomRole:IAMCustomRole")
    assert roles == {"roles/logging.logWriter", "roles/monitoring.metricWriter", role.outputs["name"]}
    assert "compute.instances.create" in role.inputs["permissions"]
    assert not any(p.startswith(("iam.", "resourcemanager.", "storage.")) for p in role.inputs["permissions"])
    (binding,) = [m.inputs for m in plan.of_type("gcp:projects/iAMMember:IAMMember") if m.inputs["role"] == role.outputs["name"]]
    zone = f"projects/{GCP_PROJECT}/zones/us-central1-a/instances/"
    prefix = instance_prefix(design_cluster(parse_spec(spec_with())))       # test-<digest>-
    assert binding["condition"]["expression"] == (f'!resource.name.startsWith("{zone}") || resource.name.startsWith('
                                                  f'"{zone}{prefix}") || resource.name.startsWith("{zone}test-gpu-")')
    (act_as,) = plan.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    compute_sa = plan.named("test-compute-account", "gcp:serviceaccount/account:Account")
    assert act_as.inputs["serviceAccountId"] == compute_sa.outputs["name"]
    assert act_as.inputs["role"] == "roles/iam.serviceAccountUser"


def test_munge_key_lives_in_secret_manager_and_only_the_cluster_reads_it(plan_spec):
    plan = plan_spec(spec_with())
    secret = plan.named("test-slurm-munge", "gcp:secretmanager/secret:Secret")
    assert secret.inputs["secretId"] == "aicluster-test-munge-key" and secret.protect and secret.retain_on_delete
    readers = {m.inputs["member"] for m in plan.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
               if m.inputs["secretId"] == secret.id}
    accounts = {a.name: a.outputs["member"] for a in plan.of_type("gcp:serviceaccount/account:Account")}
    # The login nodes' sackd authenticates with munge too (gcp/login.py).
    assert readers == {accounts["test-compute-account"], accounts["test-slurm-head-account"],
                       accounts["test-login-account"]}
    files = rendered_files(plan)
    munge = reveal(plan.named("test-slurm-munge-bytes", "random:index/randomBytes:RandomBytes").outputs["base64"])
    assert munge and all(munge not in text for text in files.values())
    version = plan.named("test-slurm-munge-value", "gcp:secretmanager/secretVersion:SecretVersion")
    assert isinstance(version.inputs["secretData"], Secret)                       # secret in Pulumi
    head = yaml.safe_load(files["user-data/test-slurm-head.yaml"])
    (fetch,) = [c for c in head["runcmd"] if c[0] == "/opt/aicluster/bin/aicluster-secret"]
    assert [secret.id, "/etc/munge/munge.key"] == fetch[1:3]


def routine_edits():
    base = spec_with()
    edits = {}
    for name, change in {
        "bigger-pool": lambda s: s["pools"][0].update(max_nodes=128),
        "new-pool": lambda s: s["pools"].append({"name": "h200", "instance_type": "h200", "max_nodes": 2}),
        "idle-time": lambda s: s.setdefault("slurm", {}).update(suspend_idle_min=45),
        "accounting": lambda s: s.setdefault("slurm", {}).update(accounting=True),
        "more-storage": lambda s: s["storage"].append({"name": "home", "type": "filestore", "mount": "/home",
                                                       "capacity_gib": 1024}),
    }.items():
        spec = copy.deepcopy(base)
        change(spec)
        edits[name] = spec
    return base, edits


@pytest.mark.parametrize("edit", ["bigger-pool", "new-pool", "idle-time", "accounting", "more-storage"])
def test_routine_edits_leave_the_head_node_untouched(plan_spec, edit):
    base, edits = routine_edits()

    def head(spec):
        h = plan_spec(spec).named("test-slurm-head", INSTANCE)
        return h.urn, h.inputs

    assert head(edits[edit]) == head(base)


DNS_ZONE = "gcp:dns/managedZone:ManagedZone"


def test_node_names_resolve_through_the_clusters_private_zone(plan_spec):
    """cloud_dns: a Cloud DNS private zone on the cluster's network, named in cluster.json for the
    power programs, and the domain searched by the head node (and every node: see below)."""
    plan = plan_spec(spec_with())
    zone = plan.named("test-slurm-dns", DNS_ZONE)
    i = zone.inputs
    assert (i["name"], i["dnsName"], i["visibility"]) == ("test-nodes", "test.aicluster.internal.", "private")
    assert i["privateVisibilityConfig"] == {"networks": [{"networkUrl": plan.named("test-network-vpc", NETWORK).id}]}
    assert i["forceDestroy"] is True and not zone.protect          # control plane: rebuilt by the next resume
    assert i["labels"]["aicluster-role"] == "control-plane" and i["labels"]["aicluster-cluster"] == "test"
    files = rendered_files(plan)
    cluster = json.loads(files["aicluster/cluster.json"])
    assert (cluster["dns_zone"], cluster["dns_domain"]) == (zone.outputs["name"], "test.aicluster.internal")
    head = yaml.safe_load(files["user-data/test-slurm-head.yaml"])
    resolved = {f["path"]: f["content"] for f in head["write_files"]}["/etc/systemd/resolved.conf.d/aicluster.conf"]
    assert "[Resolve]\nDomains=test.aicluster.internal\nCache=no-negative\n" in resolved
    assert head["runcmd"][0] == ["systemctl", "try-restart", "systemd-resolved"]


def test_head_writes_records_in_its_own_zone_only(plan_spec):
    plan = plan_spec(spec_with())
    zone = plan.named("test-slurm-dns", DNS_ZONE)
    head_sa = plan.named("test-slurm-head-account", "gcp:serviceaccount/account:Account")
    role = plan.named("test-slurm-dns-role", "gcp:projects/iAMCustomRole:IAMCustomRole")
    assert sorted(role.inputs["permissions"]) == ["dns.changes.create", "dns.resourceRecordSets.create",
                                                  "dns.resourceRecordSets.delete", "dns.resourceRecordSets.list",
                                                  "dns.resourceRecordSets.update"]
    (binding,) = plan.of_type("gcp:dns/dnsManagedZoneIamMember:DnsManagedZoneIamMember")
    assert binding.inputs == {"project": GCP_PROJECT, "managedZone": zone.outputs["name"],
                              "role": role.outputs["name"], "member": head_sa.outputs["member"]}
    # Granted on the zone, never on the project: no other zone of the project is writable.
    assert not any(m.inputs["role"] == role.outputs["name"] for m in plan.of_type("gcp:projects/iAMMember:IAMMember"))
    compute_role = plan.named("test-slurm-config-head-role", "gcp:projects/iAMCustomRole:IAMCustomRole")
    assert not any(p.startswith("dns.") for p in compute_role.inputs["permissions"])


def test_the_zone_goes_on_an_existing_network(plan_spec):
    spec = spec_with()
    spec["network"] = {"existing": {"vpc_id": "prod-vpc", "subnet_id": "projects/p/regions/us-central1/subnetworks/s"}}
    zone = plan_spec(spec).named("test-slurm-dns", DNS_ZONE)
    assert zone.inputs["privateVisibilityConfig"]["networks"] == [
        {"networkUrl": f"projects/{GCP_PROJECT}/global/networks/prod-vpc"}]


@pytest.mark.parametrize("edit", ["bigger-pool", "new-pool", "accounting", "more-storage"])
def test_routine_edits_leave_the_zone_untouched(plan_spec, edit):
    base, edits = routine_edits()

    def zone(spec):
        z = plan_spec(spec).named("test-slurm-dns", DNS_ZONE)
        return z.urn, z.inputs

    assert zone(edits[edit]) == zone(base)


def test_published_configuration_is_the_shared_slurm_templates(plan_spec):
    from aicluster.design.cluster import design_cluster
    from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
    from aicluster.spec.cluster import parse_spec

    plan = plan_spec(spec_with())
    files = rendered_files(plan)
    addr = plan.named("test-slurm-head", INSTANCE).outputs["networkInterfaces"][0]["networkIp"]
    expected = render_slurm_configs(design_cluster(parse_spec(spec_with())),
                                    SlurmRuntime(controller_host="test-head", controller_addr=addr, run_dir="/run"))
    for name, text in expected.items():
        assert files[f"slurm/{name}"] == text
    assert "SwitchName=gpu Nodes=gpu-[1-4]" in files["slurm/topology.conf"]   # one switch per placement policy
    manifest = json.loads(files["manifest.json"])
    assert {link["target"] for link in manifest["links"]} == {"aicluster-gcp-power.py"}
    runs = [f["run"] for f in manifest["files"] if f.get("run")]
    # The mount script at one path on every node of both clouds (it was /opt/aicluster/bin on the GCP
    # head only); modules the programs import are not executable, as on AWS.
    # Then pyxis, built once on the head for every node (node_local_files), in the background.
    # Last, the head's monitoring set-up, run again when its settings or its program change.
    monitoring = ["/opt/aicluster/bin/aicluster-monitoring", "--cloud", "gcp", "--role", "head",
                  "--env", "/etc/aicluster/monitoring.env", "--background"]
    assert runs == [["/usr/local/sbin/aicluster-mount-storage"], ["/opt/aicluster/bin/aicluster-accounting"],
                    ["/opt/aicluster/bin/aicluster-gcp-lustre-import"],
                    ["/opt/aicluster/bin/aicluster-pyxis-build", "--background"], monitoring, monitoring]
    modes = {f["path"]: f["mode"] for f in manifest["files"]}
    from aicluster.gcp.slurm import _PROGRAMS
    from aicluster.render.slurm_files import published_archive
    assert (modes[f"/opt/aicluster/lib/{published_archive(_PROGRAMS).name}"], modes["/opt/aicluster/bin/aicluster-gcp-power.py"]) == \
        ("0644", "0755")
    cluster = json.loads(files["aicluster/cluster.json"])
    t = plan.of_type(TEMPLATE)[0]
    assert cluster["pools"]["gpu"]["instance_template"] == t.outputs["selfLink"]
    assert cluster["pools"]["gpu"]["placement_policy"] == plan.of_type(POLICY)[0].outputs["selfLink"]
    assert (cluster["project"], cluster["zone"]) == (GCP_PROJECT, "us-central1-a")
    assert re.fullmatch(r"test-[0-9a-f]{4}-", cluster["instance_prefix"])
    objects = {o.inputs["name"] for o in plan.of_type("gcp:storage/bucketObject:BucketObject")}
    assert {"head/slurm/slurm.conf", "head/aicluster/cluster.json", "head/manifest.json"} <= objects


def test_compute_nodes_join_configless_with_the_family_nccl_stack(plan_spec):
    plan = plan_spec(spec_with("a3-ultragpu-8g"))
    user_data = yaml.safe_load(rendered_files(plan)["user-data/test-gpu-template.yaml"])
    env = dict(line.split("=", 1) for line in user_data["write_files"][1]["content"].splitlines())
    addr = plan.named("test-slurm-head", INSTANCE).outputs["networkInterfaces"][0]["networkIp"]
    assert env["AICLUSTER_CONTROLLER"] == f"{addr}:6817"
    assert (env["AICLUSTER_NIC_STACK"], env["AICLUSTER_HOST_NICS"], env["AICLUSTER_GPU_NICS"]) == ("rdma", "2", "8")
    assert (env["AICLUSTER_FABRIC_KIND"], env["AICLUSTER_FABRIC_DEVICES"]) == ("rdma", "8")
    assert env["AICLUSTER_APT_PACKAGES"] == "nccl-gib=1.1.0"
    assert env["AICLUSTER_MUNGE_SECRET"] == f"projects/{GCP_PROJECT}/secrets/aicluster-test-munge-key"
    # Node names resolve (cloud_dns): the node searches the cluster's domain before slurmd starts.
    files = {f["path"]: f["content"] for f in user_data["write_files"]}
    resolved = files["/etc/systemd/resolved.conf.d/aicluster.conf"]
    assert "[Resolve]\nDomains=test.aicluster.internal\nCache=no-negative\n" in resolved
    # Fabric, storage, then Slurm inside the bootstrap: a failed step is reported and slurmd never starts.
    assert user_data["runcmd"] == [["systemctl", "try-restart", "systemd-resolved"],
                                   ["/opt/aicluster/bin/aicluster-gcp-node-bootstrap",
                                    "--fabric", "/opt/aicluster/bin/aicluster-gcp-fabric",
                                    "--mount", "/usr/local/sbin/aicluster-mount-storage"]]
    assert "/opt/aicluster/bin/aicluster-resume-job" in files


@pytest.mark.parametrize("stack, nics", [("gcp-a3mega-slurm", 9), ("gcp-a3ultra-slurm", 10)])
def test_example_stacks_plan_their_nics(stack, nics):
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    result = stack_result(stack)
    out = "\n".join(text(result))
    assert f"{nics} NICs per node" in out
    assert "Managed Lustre" in out and "gcp:compute/instance:Instance" in out
    t = result.plan.of_type(TEMPLATE)[0].inputs
    assert len(t["networkInterfaces"]) == nics
    if stack == "gcp-a3ultra-slurm":
        assert "RDMA VPC with RoCE profile europe-west1-b-vpc-roce, MTU 8896, 8 subnets" in out
    assert stack_spec(stack)["cloud"] == "gcp"
