"""The Kubernetes versions: pinned in one place (components/aicluster/catalog/kubernetes.yaml), every entry
with a source, and consistent with each other."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, STACK_NAMES, stack_spec
from aicluster.catalog import CatalogError, load_catalog
from aicluster.design.kubernetes import _VERSIONS_FILE, versions, versions_from


def test_every_entry_has_a_source():
    v = versions()
    keys = {"kubernetes", *(f"addon:{a}" for a in v.addons), *(f"chart:{c}" for c in v.charts),
            *(f"ami:{a}" for a in v.ami_types), *(f"image:{i}" for i in v.images), "gke", "gke:accelerators",
            *(f"nccl-installer:{s}" for s in v.nccl_installers), *(f"package:{n}" for n in v.packages),
            "gke:flex-start-compact", "gke:lustre-secure-boot", "gke:maintenance", "nvlink-domains"}
    assert set(v.sources) == keys
    assert all(len(s) > 20 for s in v.sources.values())


@pytest.mark.parametrize("path", [("kubernetes",), ("eks_addons", "vpc-cni"), ("charts", "kueue"),
                                  ("ami_types", "gpu"), ("images", "pytorch-training"), ("gke",),
                                  ("gke", "accelerators"), ("nccl_installers", "rdma"), ("packages", "jax-tpu"),
                                  ("gke", "flex_start_compact"), ("gke", "lustre_secure_boot"), ("gke", "maintenance"),
                                  ("charts", "nvidia-dra-driver-gpu"), ("nvlink_domains",)])
def test_loader_refuses_an_entry_without_source(path):
    doc = yaml.safe_load(_VERSIONS_FILE.read_text())
    entry = doc
    for key in path:
        entry = entry[key]
    del entry["source"]
    with pytest.raises(CatalogError, match="source"):
        versions_from(doc)


def test_versions_follow_the_cluster_version():
    v = versions()
    minor = v.kubernetes
    assert v.addons["kube-proxy"].startswith(f"v{minor}.")          # kube-proxy tracks the control plane
    assert v.schema_version.startswith(f"{minor}.")                  # manifests validate against it
    for name, version in v.addons.items():
        assert version.startswith("v") and "-eksbuild." in version, name


def test_every_nvidia_type_in_the_catalog_runs_the_eks_nvidia_ami():
    """Every x86_64 NVIDIA type runs AL2023_x86_64_NVIDIA; the arm64 ones (Grace: image role
    gpu-arm64) AL2023_ARM_64_NVIDIA, each family in exactly its AMI's list, at the same release."""
    amis = versions().ami_types
    assert amis["gpu-arm64"]["ami_type"] == "AL2023_ARM_64_NVIDIA"
    assert amis["gpu-arm64"]["release_version"] == amis["gpu"]["release_version"]
    for itype in load_catalog().instance_types["aws"].values():
        role = "gpu-arm64" if itype.image == "gpu-arm64" else "gpu"
        other = "gpu" if role == "gpu-arm64" else "gpu-arm64"
        if itype.accelerator.kind == "gpu":
            assert itype.family in amis[role]["instance_families"], itype.name
        else:
            assert itype.family not in amis[role]["instance_families"], itype.name
        assert itype.family not in amis[other]["instance_families"], itype.name


def test_kueue_api_version_is_what_the_plan_applies(plan_spec, base_spec):
    spec = copy.deepcopy(base_spec)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc"}     # EKS needs a way to its API
    kinds = {r.type for r in plan_spec(spec).resources if "kueue.x-k8s.io" in r.type}
    api = versions().charts["kueue"].api_version
    assert kinds == {f"kubernetes:{api}:{k}" for k in ("ResourceFlavor", "ClusterQueue", "LocalQueue",
                                                        "WorkloadPriorityClass")}


def test_versions_are_pinned_nowhere_else():
    """No chart, add-on or image version appears in code or templates: one place to bump."""
    v = versions()
    pins = [c.version for c in v.charts.values()] + list(v.addons.values()) + [i.rsplit(":", 1)[1] for i in v.images.values()]
    pins += [i.rsplit(":", 1)[1] for s in v.nccl_installers.values() for i in (s.image, s.rxdm_image, s.image_arm64)
             if i]
    pins += [r.split("==", 1)[1] for r in v.packages.values()]
    sources = [p for p in (ROOT / "components").rglob("*.py")] + [p for p in (ROOT / "templates" / "k8s").rglob("*")]
    for path in sources:
        text = Path(path).read_text()
        for pin in pins:
            assert pin not in text, f"{pin} hard-coded in {path.relative_to(ROOT)}"


def test_docs_state_the_pinned_versions():
    """docs/eks.md's table says every EKS pin."""
    v = versions()
    section = (ROOT / "docs" / "eks.md").read_text().split("\n## Pinned versions (EKS)\n", 1)[1]
    expected = [f"`{v.kubernetes}`", *(f"{name} {version}" for name, version in v.addons.items()),
                *(f"`{c.version}`" for c in v.platform_charts("eks").values()),
                *(f"`{i}`" for i in v.platform_images("eks").values()),
                *(a["ami_type"] for a in v.ami_types.values()),
                *(f"`{a['release_version']}`" for a in v.ami_types.values())]
    for text in expected:
        assert text in section, f"docs/eks.md's pinned versions do not say {text}"


def test_docs_state_the_gke_pins():
    """docs/gke.md's table says every GKE pin: version, channel, driver, node image, the NCCL
    installers and RxDM sidecars, the charts, images and packages the GKE stacks use."""
    v = versions()
    section = (ROOT / "docs" / "gke.md").read_text().split("\n## Pinned versions (GKE)\n", 1)[1]
    expected = [f"`{v.gke.version}`", f"`{v.gke.release_channel}`", f"`{v.gke.gpu_driver_version}`",
                f"`{v.gke.image_type}`", *(f"`{i.image}`" for i in v.nccl_installers.values()),
                *(f"`{i.image_arm64}`" for i in v.nccl_installers.values() if i.image_arm64),
                *(f"`{i.rxdm_image}`" for i in v.nccl_installers.values() if i.rxdm_image),
                *(f"`{c.version}`" for c in v.platform_charts("gke").values()),
                *(f"`{i}`" for i in v.platform_images("gke").values()), *(f"`{r}`" for r in v.packages.values()),
                *(f"`{a}`" for a in v.gke.accelerators.values())]
    for text in expected:
        assert text in section, f"docs/gke.md's pinned versions do not say {text}"


def test_gke_follows_the_pinned_kubernetes_version():
    """GKE runs the same minor version as the manifests' schemas; every GCP GPU type has a GKE
    accelerator name; every GPU NIC stack has an installer (TCPX and TCPXO with their RxDM)."""
    v = versions()
    assert v.gke.version == v.kubernetes == v.schema_version.rsplit(".", 1)[0]
    gpus = {t.name for t in load_catalog().instance_types["gcp"].values() if t.accelerator.kind == "gpu"}
    assert set(v.gke.accelerators) == gpus
    stacks = {t.gpu_nic_stack for t in load_catalog().instance_types["gcp"].values() if t.gpu_nics}
    assert set(v.nccl_installers) == stacks
    assert all(bool(i.rxdm_image) == (s != "rdma") for s, i in v.nccl_installers.items())
    assert v.charts["jobset"].api_version == "jobset.x-k8s.io/v1alpha2" and "gke" in v.charts["kueue"].used_by


CHECKED_PATHS = [("kubernetes",), ("eks_addons", "coredns"), ("charts", "kueue"), ("charts", "jobset"),
                 ("ami_types", "system"), ("images", "pause"), ("gke",), ("gke", "accelerators"),
                 ("nccl_installers", "tcpx"), ("packages", "jax-tpu"), ("gke", "flex_start_compact")]


@pytest.mark.parametrize("path", CHECKED_PATHS)
@pytest.mark.parametrize("checked", [None, "last week", "2026-11-23T10:00:00Z", 20261123], ids=repr)
def test_loader_refuses_an_entry_without_a_checked_on_date(path, checked):
    doc = yaml.safe_load(_VERSIONS_FILE.read_text())
    entry = doc
    for key in path:
        entry = entry[key]
    if checked is None:
        del entry["checked"]
    else:
        entry["checked"] = yaml.safe_load(checked) if isinstance(checked, str) else checked
    with pytest.raises(CatalogError, match="checked"):
        versions_from(doc)


def test_loader_refuses_a_checked_on_date_in_the_future():
    import datetime

    doc = yaml.safe_load(_VERSIONS_FILE.read_text())
    doc["charts"]["kueue"]["checked"] = datetime.date.today() + datetime.timedelta(days=1)
    with pytest.raises(CatalogError, match="future"):
        versions_from(doc)


def test_every_entry_says_when_its_source_was_checked():
    """The file itself: every mapping with a `source:` has a `checked:` date beside it."""
    import datetime

    def entries(node, path=()):
        if isinstance(node, dict):
            if "source" in node:
                yield ".".join(path), node
            for key, value in node.items():
                yield from entries(value, (*path, key))

    found = dict(entries(yaml.safe_load(_VERSIONS_FILE.read_text())))
    assert len(found) == len(versions().sources)
    for where, entry in found.items():
        assert type(entry.get("checked")) is datetime.date, where


@pytest.mark.parametrize("missing", ["source", "checked"])
def test_a_chart_pinned_without_a_source_is_refused(missing):
    """A new chart pin (here Karpenter's, as a later change might add it) needs both its source
    and the date it was checked; the loader refuses it otherwise, so nothing can install it."""
    doc = yaml.safe_load(_VERSIONS_FILE.read_text())
    chart = {"repo": "oci://public.ecr.aws/karpenter", "chart": "karpenter", "version": "1.0.0",
             "namespace": "kube-system", "source": "the chart's release notes, version 1.0.0 (an example)",
             "checked": doc["charts"]["kueue"]["checked"]}
    doc["charts"]["karpenter"] = {k: v for k, v in chart.items() if k != missing}
    with pytest.raises(CatalogError, match=missing):
        versions_from(doc)
    doc["charts"]["karpenter"] = chart                      # with both, the same pin loads
    assert versions_from(doc).charts["karpenter"].version == "1.0.0"


@pytest.mark.parametrize("stack", [s for s in STACK_NAMES if stack_spec(s).get("scheduler") == "kubernetes"])
def test_every_helm_release_is_a_sourced_catalog_chart(stack):
    """What a plan installs through Helm is a chart of the catalog at its pinned version, from its
    pinned repository: no release carries a chart or version the catalog does not source."""
    from tests.support.stack_plans import stack_result

    v = versions()
    pinned = {(c.chart, c.version): c for c in v.charts.values()}
    releases = [yaml.safe_load(text) for name, text in stack_result(stack).files.items() if name.startswith("k8s/helm/")]
    assert releases, stack
    for release in releases:
        key = (release["chart"].rsplit("/", 1)[-1], str(release["version"]))
        assert key in pinned, f"{stack}: Helm release {release['name']} installs {key}, which the catalog does not pin"
        chart = pinned[key]
        assert release.get("repository", release["chart"].rsplit("/", 1)[0]) == chart.repo
        assert v.sources[f"chart:{chart.name}"] == chart.source


def test_kueue_schemas_are_the_pinned_releases():
    """The CRD schemas the manifests validate against are the pinned Kueue release's, at an API
    version that release serves and does not deprecate."""
    from tests.support.kueue_schema import crd_dir, crd_schemas, deprecated

    kueue = versions().charts["kueue"]
    assert crd_dir().name == kueue.version and crd_dir().is_dir(), \
        f"store Kueue {kueue.version}'s CRDs in tests/data/schemas/kueue/{kueue.version}"
    assert [p.name for p in crd_dir().parent.iterdir()] == [kueue.version], "one Kueue release's CRDs: the pinned one's"
    assert f"`kueue/{kueue.version}/kueue.x-k8s.io_*.yaml`" in (crd_dir().parent.parent / "README.md").read_text()
    kinds = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}
    assert kinds <= set(crd_schemas())
    assert not any(deprecated(kind) for kind in kinds)
    # The release still serves v1beta1, deprecated: the reason aicluster moved off it.
    assert deprecated("ClusterQueue", api_version="kueue.x-k8s.io/v1beta1")


def test_kueue_objects_move_to_the_new_api_in_place():
    """Stacks created with Kueue 0.14 applied the queues at v1beta1. Every Kueue object aliases its
    v1beta1 type, so `pulumi up` updates it at the new version (the type is part of the URN: without
    the alias Pulumi would create a second object of the same name, which the API server refuses,
    and delete the first, which evicts a ClusterQueue's workloads)."""
    from tests.support import GCP_MIN, run_spec

    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=[{"name": "v5p", "tpu": {"type": "v5p", "topology": "2x2x2"},
                                                "max_nodes": 2}])
    api = versions().charts["kueue"].api_version
    objects = [r for r in run_spec(spec).resources if r.type.startswith(f"kubernetes:{api}:")]
    assert {r.type.rsplit(":", 1)[1] for r in objects} == {"ResourceFlavor", "ClusterQueue", "LocalQueue",
                                                           "WorkloadPriorityClass"}
    for r in objects:
        assert r.aliases == (r.type.replace(api, "kueue.x-k8s.io/v1beta1"),), r.name
    # The names the v1beta1 objects had: <stack>-k8s-<kind>-<name>.
    assert {r.name for r in objects if r.type.endswith(":ClusterQueue")} == {"test-k8s-clusterqueue-test"}
