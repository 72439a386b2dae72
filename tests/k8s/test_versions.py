"""The Kubernetes versions: pinned in one place (components/aicluster/catalog/kubernetes.yaml), every entry
with a source, and consistent with each other."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT
from aicluster.catalog import CatalogError, load_catalog
from aicluster.kubernetes_design import _VERSIONS_FILE, versions, versions_from


def test_every_entry_has_a_source():
    v = versions()
    keys = {"kubernetes", *(f"addon:{a}" for a in v.addons), *(f"chart:{c}" for c in v.charts),
            *(f"ami:{a}" for a in v.ami_types), *(f"image:{i}" for i in v.images), "gke", "gke:accelerators",
            *(f"nccl-installer:{s}" for s in v.nccl_installers), *(f"package:{n}" for n in v.packages),
            "gke:flex-start-compact", "gke:lustre-secure-boot"}
    assert set(v.sources) == keys
    assert all(len(s) > 20 for s in v.sources.values())


@pytest.mark.parametrize("path", [("kubernetes",), ("eks_addons", "vpc-cni"), ("charts", "kueue"),
                                  ("ami_types", "gpu"), ("images", "pytorch-training"), ("gke",),
                                  ("gke", "accelerators"), ("nccl_installers", "rdma"), ("packages", "jax-tpu"),
                                  ("gke", "flex_start_compact"), ("gke", "lustre_secure_boot")])
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
    families = versions().ami_types["gpu"]["instance_families"]
    for itype in load_catalog().instance_types["aws"].values():
        if itype.accelerator.kind == "gpu":
            assert itype.family in families, itype.name
        else:
            assert itype.family not in families, itype.name


def test_kueue_api_version_is_what_the_plan_applies(plan_spec, base_spec):
    spec = copy.deepcopy(base_spec)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc"}     # EKS needs a way to its API
    kinds = {r.type for r in plan_spec(spec).resources if "kueue.x-k8s.io" in r.type}
    api = versions().charts["kueue"].api_version
    assert kinds == {f"kubernetes:{api}:{k}" for k in ("ResourceFlavor", "ClusterQueue", "LocalQueue")}


def test_versions_are_pinned_nowhere_else():
    """No chart, add-on or image version appears in code or templates: one place to bump."""
    v = versions()
    pins = [c.version for c in v.charts.values()] + list(v.addons.values()) + [i.rsplit(":", 1)[1] for i in v.images.values()]
    pins += [i.rsplit(":", 1)[1] for s in v.nccl_installers.values() for i in (s.image, s.rxdm_image) if i]
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
                *(a["ami_type"] for a in v.ami_types.values())]
    for text in expected:
        assert text in section, f"docs/eks.md's pinned versions do not say {text}"


def test_docs_state_the_gke_pins():
    """docs/gke.md's table says every GKE pin: version, channel, driver, node image, the NCCL
    installers and RxDM sidecars, the charts, images and packages the GKE stacks use."""
    v = versions()
    section = (ROOT / "docs" / "gke.md").read_text().split("\n## Pinned versions (GKE)\n", 1)[1]
    expected = [f"`{v.gke.version}`", f"`{v.gke.release_channel}`", f"`{v.gke.gpu_driver_version}`",
                f"`{v.gke.image_type}`", *(f"`{i.image}`" for i in v.nccl_installers.values()),
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
