"""Sockets, cores and threads per node, and GPUs bound to their socket's cores (issue 15, item 5):
the rendered node lines and gres.conf, and the catalog facts behind them. Real slurmctld daemons of
22.05 and 24.11 read the same files in test_affinity_and_settings.py."""
from __future__ import annotations

import pytest

import aicluster.catalog as catalog_module
from aicluster.catalog import CatalogError, load_catalog
from aicluster.design.cluster import design_cluster
from aicluster.render.slurm_config import SlurmRuntime, gpu_bindings, render_slurm_configs
from aicluster.spec.cluster import parse_spec

RT = SlurmRuntime(controller_host="head", controller_addr="10.0.0.10")
CATALOG = load_catalog()
TYPES = [t for types in CATALOG.instance_types.values() for t in types.values()]


def render(cloud: str, instance_type: str, **pool) -> dict[str, str]:
    zone = {"aws": ("us-east-1", "us-east-1a"), "gcp": ("us-central1", "us-central1-a")}[cloud]
    spec = {"name": "topo", "cloud": cloud, "region": zone[0], "zone": zone[1],
            "pools": [{"name": "gpu", "instance_type": instance_type, "max_nodes": 2, **pool}]}
    return render_slurm_configs(design_cluster(parse_spec(spec)), RT)


def node_line(files: dict[str, str]) -> str:
    return next(ln for ln in files["slurm.conf"].splitlines() if ln.startswith("NodeName="))


def gres_lines(files: dict[str, str]) -> list[str]:
    return [ln for ln in files["gres.conf"].splitlines() if ln and not ln.startswith("#")]


@pytest.mark.parametrize("cloud,itype,layout", [
    ("aws", "p5.48xlarge", "SocketsPerBoard=2 CoresPerSocket=48 ThreadsPerCore=2"),
    ("aws", "p4d.24xlarge", "SocketsPerBoard=2 CoresPerSocket=24 ThreadsPerCore=2"),
    ("gcp", "a3-megagpu-8g", "SocketsPerBoard=2 CoresPerSocket=52 ThreadsPerCore=2"),
    ("gcp", "a3-ultragpu-8g", "SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2"),
    # No sourced socket count: one socket of all the cores, as before (slurm.conf.j2 says why).
    ("aws", "p5en.48xlarge", "SocketsPerBoard=1 CoresPerSocket=96 ThreadsPerCore=2"),
])
def test_node_lines_declare_the_real_sockets(cloud, itype, layout):
    assert f" Boards=1 {layout} " in node_line(render(cloud, itype))


def test_a3_high_gpus_are_bound_to_their_sockets_cores():
    files = render("gcp", "a3-highgpu-8g", image="projects/my-project/global/images/family/my-a3-image")
    assert gres_lines(files) == [
        "NodeName=gpu-[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-51",
        "NodeName=gpu-[1-2] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=52-103",
    ]


@pytest.mark.parametrize("cloud,itype", [("aws", "p5.48xlarge"), ("gcp", "a3-megagpu-8g"), ("aws", "p5en.48xlarge")])
def test_no_binding_where_the_gpu_layout_is_not_sourced(cloud, itype):
    """Explicit File= as before, and no Cores= (any core) rather than a guessed binding."""
    lines = gres_lines(render(cloud, itype))
    assert len(lines) == 1 and lines[0].endswith(" File=/dev/nvidia[0-7]"), lines


def test_a_binding_covers_every_gpu_and_every_core_once():
    files = render("gcp", "a3-highgpu-8g", image="projects/my-project/global/images/family/my-a3-image")
    ns = design_cluster(parse_spec({"name": "topo", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                                    "pools": [{"name": "gpu", "instance_type": "a3-highgpu-8g", "max_nodes": 2,
                                               "image": "projects/my-project/global/images/family/my-a3-image"}]})
                        ).slurm.nodesets[0]
    bindings = gpu_bindings(ns)
    gpus = [g for b in bindings for g in range(b.first, b.last + 1)]
    cores = [c for b in bindings for c in range(*(lambda a, z: (int(a), int(z) + 1))(*b.cores.split("-")))]
    assert gpus == list(range(8)) and cores == list(range(ns.cores))
    assert len(gres_lines(files)) == ns.sockets


@pytest.mark.parametrize("it", [t for t in TYPES if t.sockets], ids=lambda t: t.name)
def test_catalog_sockets_divide_cores_and_gpu_layouts_fill_the_sockets(it):
    assert it.cores % it.sockets == 0
    if it.gpus_per_socket:
        assert it.gpus_per_socket * it.sockets == it.accelerator_count


def test_sockets_need_their_own_source_and_must_divide_the_cores():
    with pytest.raises(CatalogError, match="socket_source"):
        catalog_module._sockets({"cores": 96, "sockets": 2}, "aws.yaml instance_types.x")
    with pytest.raises(CatalogError, match="must divide"):
        catalog_module._sockets({"cores": 96, "sockets": 5, "socket_source": "s"}, "aws.yaml instance_types.x")
    assert catalog_module._sockets({"cores": 96, "sockets": 2, "socket_source": "s"}, "w") == 2
    assert catalog_module._sockets({"cores": 96}, "w") is None
