"""Identity and data for pods: `kubernetes.service_accounts` become exact cloud identities (EKS Pod
Identity roles, GKE Workload Identity service accounts) and Kubernetes ServiceAccounts;
`kubernetes.datasets` become read-only object-store volumes (Mountpoint for S3, Cloud Storage
FUSE) that authenticate as the pod, validated against the pinned Kubernetes schema, and counted by
the balance model. Under mocks: the real program, run by the offline engine."""
from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest

from aicluster.errors import SpecError
from aicluster.design.kubernetes import versions
from aicluster.offline.capture import reveal
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, GCP_MIN, run_spec
from tests.support.manifests import validate

ROLE, ROLE_POLICY = "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON = "aws:eks/addon:Addon"
SA, PV, PVC = "kubernetes:core/v1:ServiceAccount", "kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"
GSA, WI, BUCKET_MEMBER = ("gcp:serviceaccount/account:Account", "gcp:serviceaccount/iAMMember:IAMMember",
                          "gcp:storage/bucketIAMMember:BucketIAMMember")

EKS_ACCOUNTS = [{"name": "trainer", "namespace": "vision",
                 "buckets": [{"uri": "s3://corp-data/imagenet", "access": "read"},
                             {"uri": "s3://corp-ckpt", "access": "readwrite"}]}]
EKS_DATASETS = [{"name": "imagenet", "namespace": "vision", "uri": "s3://corp-data/imagenet/train",
                 "service_account": "trainer", "cache_gib": 200}]


def eks_spec(accounts=EKS_ACCOUNTS, datasets=EKS_DATASETS) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc", "teams": [{"name": "vision"}],
                          "service_accounts": copy.deepcopy(accounts), "datasets": copy.deepcopy(datasets)}
    return spec


def gke_spec(accounts=None, datasets=None) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec["scheduler"] = "kubernetes"
    spec["pools"] = [{"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 4}]
    spec["kubernetes"] = {
        "service_accounts": accounts if accounts is not None else [
            {"name": "trainer", "buckets": [{"uri": "gs://corp-data"}, {"uri": "gs://corp-ckpt", "access": "readwrite"}]}],
        "datasets": datasets if datasets is not None else [
            {"name": "tokens", "uri": "gs://corp-data/tokens", "service_account": "trainer", "cache_gib": 100}]}
    return spec


@pytest.fixture(scope="module")
def eks_plan():
    return run_spec(eks_spec())


@pytest.fixture(scope="module")
def gke_plan():
    return run_spec(gke_spec())


# ---------------------------------------------------------------- the spec refuses loose grants


def problems(spec) -> list:
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    return list(err.value.problems)


def test_the_default_service_account_is_refused():
    (p,) = problems(eks_spec([{"name": "default", "buckets": [{"uri": "s3://corp-data"}]}], []))
    assert p.path == "kubernetes.service_accounts[0].name" and "every pod" in p.allowed


def test_an_unknown_namespace_is_refused_with_a_close_match():
    (p,) = problems(eks_spec([{**EKS_ACCOUNTS[0], "namespace": "visoin"}], []))
    assert (p.path, p.value, p.suggestion) == ("kubernetes.service_accounts[0].namespace", "visoin", "vision")


def test_the_other_clouds_bucket_is_refused_with_this_clouds_scheme():
    (p,) = problems(gke_spec([{"name": "trainer", "buckets": [{"uri": "s3://corp-data"}]}], []))
    assert p.path == "kubernetes.service_accounts[0].buckets[0].uri" and p.suggestion == "gs://corp-data"


def test_a_prefix_grant_on_gcs_is_refused():
    """GCS roles are per bucket: a prefix would silently grant the whole bucket."""
    (p,) = problems(gke_spec([{"name": "trainer", "buckets": [{"uri": "gs://corp-data/team-a"}]}], []))
    assert p.path == "kubernetes.service_accounts[0].buckets[0].uri" and "whole bucket" in p.allowed


def test_a_bucket_named_twice_is_refused():
    grants = [{"uri": "s3://corp-data/a"}, {"uri": "s3://corp-data/b", "access": "readwrite"}]
    (p,) = problems(eks_spec([{"name": "trainer", "namespace": "vision", "buckets": grants}], []))
    assert p.path == "kubernetes.service_accounts[0].buckets[1].uri"


def test_a_dataset_needs_a_declared_account_in_its_namespace():
    (p,) = problems(eks_spec(datasets=[{**EKS_DATASETS[0], "service_account": "trainr"}]))
    assert (p.path, p.suggestion) == ("kubernetes.datasets[0].service_account", "trainer")
    (p,) = problems(eks_spec(datasets=[{**EKS_DATASETS[0], "namespace": None}]))   # trainer lives in vision
    assert p.path == "kubernetes.datasets[0].service_account" and "training" in p.allowed


def test_a_dataset_outside_the_accounts_grants_is_refused():
    (p,) = problems(eks_spec(datasets=[{**EKS_DATASETS[0], "uri": "s3://corp-data/imagenet-private"}]))
    assert p.path == "kubernetes.datasets[0].uri" and "s3://corp-data/imagenet" in p.allowed


def test_a_dataset_may_not_take_a_filesystems_name():
    spec = eks_spec(datasets=[{**EKS_DATASETS[0], "name": "fsx"}])
    spec["storage"] = [{"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 1200}]
    (p,) = problems(spec)
    assert p.path == "kubernetes.datasets[0].name"


# ---------------------------------------------------------------- EKS: Pod Identity, exactly


def test_each_account_gets_a_pod_identity_role_with_exactly_its_buckets(eks_plan):
    (association,) = [r for r in eks_plan.of_type(ASSOCIATION) if r.inputs["serviceAccount"] == "trainer"]
    a = reveal(association.inputs)
    assert (a["namespace"], a["serviceAccount"]) == ("vision", "trainer")
    role = next(r for r in eks_plan.of_type(ROLE) if r.outputs["arn"] == a["roleArn"])
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust == [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                      "Action": ["sts:AssumeRole", "sts:TagSession"]}]
    (policy,) = [p for p in eks_plan.of_type(ROLE_POLICY) if p.inputs["role"] == role.id]
    assert json.loads(policy.inputs["policy"])["Statement"] == [
        {"Sid": "List0", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::corp-data"],
         "Condition": {"StringLike": {"s3:prefix": ["imagenet", "imagenet/*"]}}},
        {"Sid": "Objects0", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::corp-data/imagenet/*"]},
        {"Sid": "List1", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::corp-ckpt"]},
        {"Sid": "Objects1", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
         "Resource": ["arn:aws:s3:::corp-ckpt/*"]}]
    # The association waits for the policy (no window where the pod has the role but no access).
    assert policy.urn in association.dependencies


def test_the_service_account_lives_in_its_team_namespace(eks_plan):
    (sa,) = [s for s in eks_plan.of_type(SA) if s.inputs["metadata"]["name"] == "trainer"]
    assert sa.inputs["metadata"]["namespace"] == "vision" and "annotations" not in sa.inputs["metadata"]
    namespace = next(n for n in eks_plan.of_type("kubernetes:core/v1:Namespace")
                     if n.inputs["metadata"]["name"] == "vision")
    assert namespace.urn in sa.dependencies


def test_the_mountpoint_driver_is_pinned_and_holds_no_s3_permission(eks_plan):
    (addon,) = [a for a in eks_plan.of_type(ADDON) if a.inputs["addonName"] == "aws-mountpoint-s3-csi-driver"]
    assert addon.inputs["addonVersion"] == versions().addons["aws-mountpoint-s3-csi-driver"]
    assert not addon.inputs.get("podIdentityAssociations") and not addon.inputs.get("serviceAccountRoleArn")


def test_the_dataset_is_a_read_only_mountpoint_volume_read_as_the_pod(eks_plan):
    (pv,) = [v for v in eks_plan.of_type(PV) if v.inputs["metadata"]["name"] == "demo-imagenet"]
    spec = reveal(pv.inputs)["spec"]
    assert spec["accessModes"] == ["ReadOnlyMany"] and spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["claimRef"] == {"namespace": "vision", "name": "imagenet"}
    assert spec["csi"] == {"driver": "s3.csi.aws.com", "volumeHandle": "demo-imagenet", "readOnly": True,
                           "volumeAttributes": {"bucketName": "corp-data", "authenticationSource": "pod",
                                                "stsRegion": "us-east-1", "cache": "emptyDir",
                                                "cacheEmptyDirSizeLimit": "200Gi"}}
    assert spec["mountOptions"] == ["region us-east-1", "prefix imagenet/train/"]
    (pvc,) = [c for c in eks_plan.of_type(PVC) if c.inputs["metadata"]["name"] == "imagenet"]
    assert pvc.inputs["metadata"]["namespace"] == "vision" and pvc.inputs["spec"]["volumeName"] == "demo-imagenet"


def test_identities_exist_before_the_api_is_reachable():
    """api_access private (phase 1) creates no in-cluster object, but the roles and associations are
    cloud resources: they are there when phase 2 adds the ServiceAccounts."""
    spec = eks_spec()
    spec["kubernetes"]["api_access"] = "private"
    plan = run_spec(spec)
    assert [r.inputs["namespace"] for r in plan.of_type(ASSOCIATION) if r.inputs["serviceAccount"] == "trainer"] == ["vision"]
    assert not plan.of_type(SA) and not plan.of_type(PV)


# ---------------------------------------------------------------- GKE: Workload Identity, exactly


def test_each_account_gets_a_google_service_account_only_it_may_act_as(gke_plan):
    (gsa,) = [g for g in gke_plan.of_type(GSA) if g.inputs["accountId"].startswith("training-trainer-")]
    assert 6 <= len(gsa.inputs["accountId"]) <= 30
    email = gsa.outputs["email"]
    (binding,) = gke_plan.of_type(WI)
    assert binding.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert binding.inputs["member"] == "serviceAccount:aicluster-test.svc.id.goog[training/trainer]"
    assert binding.inputs["serviceAccountId"].endswith(email)
    grants = {(m.inputs["bucket"], m.inputs["role"]) for m in gke_plan.of_type(BUCKET_MEMBER)
              if m.inputs["member"] == f"serviceAccount:{email}"}
    assert grants == {("corp-data", "roles/storage.objectViewer"), ("corp-ckpt", "roles/storage.objectUser")}
    assert not [m for m in gke_plan.of_type("gcp:projects/iAMMember:IAMMember") if email in str(m.inputs["member"])]
    (sa,) = [s for s in gke_plan.of_type(SA) if s.inputs["metadata"]["name"] == "trainer"]
    assert sa.inputs["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": email}


def test_the_gcs_fuse_driver_is_on_and_the_dataset_is_a_read_only_volume(gke_plan):
    (cluster,) = gke_plan.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    (pv,) = [v for v in gke_plan.of_type(PV) if v.inputs["metadata"]["name"] == "test-tokens"]
    spec = reveal(pv.inputs)["spec"]
    assert spec["csi"] == {"driver": "gcsfuse.csi.storage.gke.io", "volumeHandle": "corp-data", "readOnly": True}
    assert spec["mountOptions"] == ["implicit-dirs", "only-dir=tokens", "file-cache:max-size-mb:102400",
                                    "file-cache:cache-file-for-range-read:true"]
    assert spec["accessModes"] == ["ReadOnlyMany"] and spec["claimRef"] == {"namespace": "training", "name": "tokens"}


def test_cloud_names_fit_their_limits_and_differ_between_clusters():
    from aicluster.design.pod_identity import PodIdentity, gsa_account_id, iam_role_name

    ident = PodIdentity("a-rather-long-service-ac", "a-long-team-namespace-xx", ())
    a, b = gsa_account_id("cluster-one", ident), gsa_account_id("cluster-two", ident)
    assert a != b and all(6 <= len(x) <= 30 and x[0].isalpha() and not x.endswith("-") for x in (a, b))
    long_cluster = "c" * 32
    roles = {iam_role_name(long_cluster, ident), iam_role_name(long_cluster, PodIdentity("other", ident.namespace, ()))}
    assert len(roles) == 2 and all(len(r) <= 64 for r in roles)
    assert iam_role_name("demo", PodIdentity("trainer", "vision", ())).startswith("demo-pod-vision-trainer-")


# ---------------------------------------------------------------- manifests: strict, with negatives


def _documents(plan) -> list[dict]:
    return [reveal(r.inputs) for r in (*plan.of_type(SA), *plan.of_type(PV), *plan.of_type(PVC))]


def test_the_objects_validate_against_the_pinned_kubernetes_schema(eks_plan, gke_plan):
    docs = _documents(eks_plan) + _documents(gke_plan)
    assert {d["kind"] for d in docs} == {"ServiceAccount", "PersistentVolume", "PersistentVolumeClaim"}
    for doc in docs:
        validate(doc)


@pytest.mark.parametrize("break_it", [
    lambda pv: pv["spec"]["csi"].update(readonly=True),                      # misspelt field
    lambda pv: pv["spec"].update(accessModes="ReadOnlyMany"),                # not a list
    lambda pv: pv["spec"]["csi"].pop("driver"),                              # required field
    lambda pv: pv["spec"]["claimRef"].update(namespaces="vision"),           # unknown field
])
def test_a_broken_volume_fails_validation(eks_plan, break_it):
    pv = copy.deepcopy(next(d for d in _documents(eks_plan) if d["kind"] == "PersistentVolume"
                            and d["metadata"]["name"] == "demo-imagenet"))
    validate(pv)
    break_it(pv)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pv)


# ---------------------------------------------------------------- balance: datasets are read throughput


def test_datasets_count_toward_the_read_floor_not_checkpoints():
    from aicluster.design.balance import ObjectStoreShape, PoolShape, assess, client_gbps
    from aicluster.catalog import load_catalog

    a3u = load_catalog().instance_types["gcp"]["a3-ultragpu-8g"]
    pools = [PoolShape("gpu", a3u, 8, a3u.gpu_nics)]
    bare = assess(pools, [])
    fuse = assess(pools, [], object_stores=[ObjectStoreShape("gcsfuse", 4.11)])
    assert bare.fs_meets_floor is False and fuse.fs_meets_floor is True
    assert fuse.object_store_gbs == pytest.approx(8 * min(4.11, client_gbps(a3u) / 8))
    assert fuse.fs_throughput_gbs == 0                           # filesystems only: no checkpoint target
    from aicluster.design.balance import WorkloadShape
    with_ckpt = assess(pools, [], WorkloadShape(70, 30, 5), object_stores=[ObjectStoreShape("gcsfuse", 4.11)])
    assert with_ckpt.checkpoint_write_s is None
    assert any("no shared filesystem to write" in f for f in with_ckpt.findings)


def test_a_driver_without_a_figure_reads_at_the_nodes_storage_network():
    from aicluster.design.balance import ObjectStoreShape, PoolShape, client_gbps, object_store_mbps
    from aicluster.catalog import load_catalog

    p5 = load_catalog().instance_types["aws"]["p5.48xlarge"]
    pools = [PoolShape("gpu", p5, 16, p5.efa_devices if hasattr(p5, "efa_devices") else 32)]
    assert object_store_mbps(pools, ObjectStoreShape("mountpoint-s3", None)) == pytest.approx(16 * client_gbps(p5) / 8 * 1000)
    assert object_store_mbps(pools, ObjectStoreShape("x", 1.0)) == pytest.approx(16 * 1000)


def test_the_plan_shows_dataset_throughput_from_the_catalog():
    from aicluster.design.balance import from_design
    from aicluster.catalog.object_store import load_object_store
    from aicluster.design.cluster import design_cluster

    spec = parse_spec(gke_spec())
    balance = from_design(design_cluster(spec))
    figure = load_object_store()["gcsfuse"].read_gbps_per_client
    assert balance.object_store_gbs == pytest.approx(4 * figure)
    assert "source" not in str(figure) and load_object_store()["gcsfuse"].source.startswith("github.com/GoogleCloudPlatform/gcsfuse")


def test_an_object_store_figure_without_a_source_is_refused(monkeypatch):
    from aicluster.catalog import CatalogError, object_store

    doc = {"object_store": {"mountpoint-s3": {"read_gbps_per_client": None, "source": "x"},
                            "gcsfuse": {"read_gbps_per_client": 4.11}}}
    monkeypatch.setattr(object_store, "_read", lambda name: doc)
    object_store.load_object_store.cache_clear()
    try:
        with pytest.raises(CatalogError, match="source"):
            object_store.load_object_store()
    finally:
        object_store.load_object_store.cache_clear()
