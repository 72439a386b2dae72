"""aicluster:gcp:GkeAddons - what runs inside the GKE cluster, through pulumi_kubernetes and the
cluster's own provider (versions from components/aicluster/catalog/kubernetes.yaml):

- multi-network: a GKENetworkParamSet + Network pair per additional node network of the GPU node
  pools (deviceMode RDMA for MRDMA NICs, NetDevice for gVNIC; names within GKE's 41 characters);
- the NCCL installer DaemonSet of every GPU NIC stack the pools use (TCPX, TCPXO or gIB), at its
  pinned version (templates/k8s/gke-nccl-installer.yaml.j2, after Google's manifests);
- gang scheduling: Kueue and JobSet (Helm, pinned), a ResourceFlavor per pool, a ClusterQueue whose
  quotas are the pools' totals (TPU chips included) and the LocalQueue of the training namespace;
- storage: per filesystem a static PersistentVolume (the Managed Lustre or Filestore CSI driver GKE
  runs) bound to a claim in the training namespace, Retain;
- the example jobs, published in a ConfigMap and written by `aicluster plan --out DIR`: per GPU pool
  a multi-node job with the family's multi-network pod annotations, per TPU pool a JobSet over its
  slices;
- NVLink domains (A4X pools): the NVIDIA DRA driver with ComputeDomains and a Kueue Topology down
  to the sub-block (aicluster.kubernetes.nvlink);
- GPU node health: the agent DaemonSet per GPU pool (aicluster.kubernetes.health), with the driver's host
  path and without the fabric count (node_health_settings);
- metrics (aicluster.kubernetes.metrics): dcgm-exporter, node-exporter and kube-state-metrics, the
  PodMonitorings managed collection scrapes (Kueue's too).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from aicluster.design.model import ClusterDesign
from aicluster.design.parts import StorageDesign
from aicluster.design.gke_parts import GkeNetwork, GkeNodePool
from aicluster.kubernetes.data import pod_identities_and_datasets
from aicluster.kubernetes.jobs import gpu_job_scripts
from aicluster.kubernetes.in_cluster import (JOB_PRIORITY, SCRIPT_DIR, examples_configmap, gang_charts, helm_release, job_claims,
                             job_name, kueue_queues,
                             render_train_job, static_volume, training_namespace)
from aicluster.design.kubernetes import EXAMPLES_CONFIGMAP, POOL_LABEL, ROLE_LABEL, versions
from aicluster.kubernetes.health import NodeHealthSettings, expectations, gpu_pools, node_health
from aicluster.kubernetes.metrics import MetricsSettings, metrics
from aicluster.kubernetes.nvlink import critical_priority_quota, dra_driver_values
from aicluster.mounts import Mount
from aicluster.render.templates import render, static

NETWORK_API = "networking.gke.io/v1"
LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"
# What the NCCL installer of each stack is called (Google's manifests' names) and is derived from.
INSTALLERS = {"tcpx": ("nccl-tcpx-installer", "gpudirect-tcpx/nccl-tcpx-installer.yaml"),
              "tcpxo": ("nccl-tcpxo-installer", "gpudirect-tcpxo/nccl-tcpxo-installer.yaml"),
              "rdma": ("nccl-rdma-installer", "gpudirect-rdma/nccl-rdma-installer.yaml")}
# Inside a pod: the node's NCCL + plugin (the installer's output) and the gIB scripts.
NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
NVIDIA_LIB = "/usr/local/nvidia/lib64"
STACK_LABELS = {"tcpx": "GPUDirect-TCPX", "tcpxo": "GPUDirect-TCPXO", "rdma": "GPUDirect RDMA, NCCL gIB"}


# ---------------------------------------------------------------- multi-network objects


def network_param_set(net: GkeNetwork, vpc: str, subnet: str, cluster: str) -> dict:
    return {"apiVersion": NETWORK_API, "kind": "GKENetworkParamSet",
            "metadata": {"name": net.name, "labels": {"aicluster-cluster": cluster}},
            "spec": {"vpc": vpc, "vpcSubnet": subnet, "deviceMode": net.device_mode}}


def network_object(net: GkeNetwork, cluster: str) -> dict:
    return {"apiVersion": NETWORK_API, "kind": "Network",
            "metadata": {"name": net.name, "labels": {"aicluster-cluster": cluster}},
            "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                         "name": net.name}}}


# ---------------------------------------------------------------- NCCL installers


def installer_name(stack: str, arch: str = "x86_64") -> str:
    """Google's DaemonSet name; an arm64 one (Grace nodes, their own plugin build) is suffixed."""
    return INSTALLERS[stack][0] + ("-arm64" if arch == "arm64" else "")


def installer_archs(design: ClusterDesign, stack: str) -> tuple[str, ...]:
    """The CPU architectures of the node pools of a NIC stack: one installer DaemonSet each."""
    return tuple(dict.fromkeys(p.arch for p in design.kubernetes.gke.node_pools if p.nic_stack == stack))


def render_installer(design: ClusterDesign, stack: str, arch: str = "x86_64") -> str:
    v = versions()
    gke = design.kubernetes.gke
    upstream = INSTALLERS[stack][1]
    installer = v.nccl_installers[stack]
    image = installer.image_arm64 if arch == "arm64" else installer.image
    if image is None:
        raise ValueError(f"catalog/kubernetes.yaml nccl_installers.{stack}: no {arch} image")
    accelerators = sorted({p.accelerator for p in gke.node_pools
                           if p.nic_stack == stack and p.accelerator and p.arch == arch})
    return render("k8s/gke-nccl-installer.yaml.j2", cluster=design.name, stack=stack, name=installer_name(stack, arch),
                  upstream=upstream, accelerators=accelerators, image=image,
                  node_tools_image=v.images["node-tools"], pause_image=v.images["pause"])


# ---------------------------------------------------------------- example jobs


def pod_interfaces(pool: GkeNodePool) -> str:
    """networking.gke.io/interfaces: eth0 on the cluster's network, then every GPU NIC network on
    the interface Google's manifests give it (A3 Mega eth1-eth8, A3 Ultra / A4 eth2-eth9)."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}]
    interfaces += [{"interfaceName": n.interface, "network": n.name} for n in pool.networks if n.gpu]
    return json.dumps(interfaces)


def _device_annotation(gpus: int, extra: Sequence[str] = ()) -> str:
    """devices.gke.io/container.<sidecar>: the GPU devices the RxDM sidecar needs (no GPU of its own)."""
    paths = [f"/dev/nvidia{i}" for i in range(gpus)] + ["/dev/nvidiactl", "/dev/nvidia-uvm", *extra]
    return "".join(f"- path: {p}\n" for p in paths)


def _host_path(name: str, path: str) -> dict:
    return {"name": name, "hostPath": {"path": path}}


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts) as literal blocks, as a person writes them."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s,
                                                             style="|" if "\n" in s else None))


def _dump(items) -> str:
    return yaml.dump(items, Dumper=_Dumper, sort_keys=False, default_flow_style=False).rstrip("\n")


def gpu_job_settings(design: ClusterDesign, pool_name: str) -> tuple[list[tuple[str, str]], dict | None]:
    """(NCCL environment, GKE additions for templates/k8s/train-job.yaml.j2) of a GPU pool's worker,
    per NIC stack, after Google's manifests (container-engine-accelerators gpudirect-*)."""
    v = versions()
    gke_pool = design.kubernetes.gke.node_pool(pool_name)
    stack, gpus = gke_pool.nic_stack, gke_pool.gpus
    gpu_nets = [n for n in gke_pool.networks if n.gpu]
    env = [("NCCL_DEBUG", "INFO")]              # the log names the network NCCL chose
    extra = {"annotations": {}, "init_containers": "", "mounts": "", "volumes": "", "setup": "",
             "trainer_security": "", "fabric": "the host network (no GPU NICs)"}
    if stack == "none":
        env.append(("NCCL_SOCKET_IFNAME", "eth0"))
        return env, extra
    extra["fabric"] = f"{len(gpu_nets)} GPU NIC networks ({STACK_LABELS[stack]})"
    extra["annotations"] = {"networking.gke.io/default-interface": "eth0",
                            "networking.gke.io/interfaces": pod_interfaces(gke_pool)}
    lib_path = f"export LD_LIBRARY_PATH={NVIDIA_LIB}:${{LD_LIBRARY_PATH}} &&"
    if stack == "rdma":
        extra["setup"] = f"source /usr/local/gib/scripts/set_nccl_env.sh && {lib_path}"
        extra["mounts"] = _dump([{"name": "nvidia-host", "mountPath": "/usr/local/nvidia"},
                                 {"name": "gib", "mountPath": "/usr/local/gib"}])
        extra["volumes"] = _dump([_host_path("nvidia-host", NVIDIA_HOST_DIR), _host_path("gib", "/home/kubernetes/bin/gib")])
        return env, extra
    installer = v.nccl_installers[stack]
    daemon = f"{stack}-daemon"
    extra["annotations"][f"devices.gke.io/container.{daemon}"] = _device_annotation(
        gpus, ["/dev/dmabuf_import_helper"] if stack == "tcpxo" else [])
    rxdm_env = [{"name": "LD_LIBRARY_PATH", "value": NVIDIA_LIB}]
    if stack == "tcpxo":
        sidecar = {"name": daemon, "image": installer.rxdm_image, "restartPolicy": "Always",
                   "command": ["/bin/sh", "-c"],
                   "args": ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
                            "/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8\n"],
                   "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
                   "volumeMounts": [{"name": "nvidia-lib", "mountPath": NVIDIA_LIB},
                                    {"name": "sys", "mountPath": "/hostsysfs"},
                                    {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
                   "env": rxdm_env}
        extra["setup"] = (f"export NCCL_LIB_DIR={NVIDIA_LIB} && {lib_path} "
                          f"source {NVIDIA_LIB}/nccl-env-profile.sh &&")
        env.append(("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"))
        extra["mounts"] = _dump([{"name": "nvidia-lib", "mountPath": NVIDIA_LIB},
                                 {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"}])
        extra["volumes"] = _dump([_host_path("nvidia-lib", f"{NVIDIA_HOST_DIR}/lib64"), _host_path("sys", "/sys"),
                                  _host_path("proc-sys", "/proc/sys"),
                                  _host_path("aperture-devices", "/dev/aperture_devices")])
    else:   # tcpx
        sidecar = {"name": daemon, "image": installer.rxdm_image, "restartPolicy": "Always",
                   "command": ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm",
                               "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx", "--setup_param",
                               "--verbose 128 2 0"],
                   "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                   "volumeMounts": [{"name": "nvidia-lib", "mountPath": NVIDIA_LIB},
                                    {"name": "tcpx-socket", "mountPath": "/run/tcpx"},
                                    {"name": "sys", "mountPath": "/hostsysfs"},
                                    {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
                   "env": rxdm_env}
        extra["setup"] = lib_path
        nics = ",".join(n.interface for n in gpu_nets)
        g = [n.interface for n in gpu_nets]
        env += [("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
                ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", nics),
                ("NCCL_GPUDIRECTTCPX_TX_BINDINGS",
                 f"{g[0]}:8-21,112-125;{g[1]}:8-21,112-125;{g[2]}:60-73,164-177;{g[3]}:60-73,164-177"),
                ("NCCL_GPUDIRECTTCPX_RX_BINDINGS",
                 f"{g[0]}:22-35,126-139;{g[1]}:22-35,126-139;{g[2]}:74-87,178-191;{g[3]}:74-87,178-191"),
                ("NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS", "500000"),
                ("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", "/run/tcpx"),
                ("NCCL_ALGO", "Ring,Tree"), ("NCCL_PROTO", "Simple"), ("NCCL_CROSS_NIC", "0"),
                ("NCCL_NET_GDR_LEVEL", "PIX"), ("NCCL_P2P_PXN_LEVEL", "0"), ("NCCL_DYNAMIC_CHUNK_SIZE", "524288"),
                ("NCCL_P2P_NET_CHUNKSIZE", "524288"), ("NCCL_P2P_PCI_CHUNKSIZE", "524288"),
                ("NCCL_P2P_NVL_CHUNKSIZE", "1048576"), ("NCCL_BUFFSIZE", "4194304"),
                ("NCCL_NSOCKS_PERTHREAD", "4"), ("NCCL_SOCKET_NTHREADS", "1")]
        extra["trainer_security"] = _dump({"capabilities": {"add": ["IPC_LOCK"]}})
        extra["mounts"] = _dump([{"name": "nvidia-lib", "mountPath": NVIDIA_LIB},
                                 {"name": "tcpx-socket", "mountPath": "/run/tcpx"}])
        extra["volumes"] = _dump([_host_path("nvidia-lib", f"{NVIDIA_HOST_DIR}/lib64"),
                                  _host_path("tcpx-socket", "/run/tcpx"), _host_path("sys", "/sys"),
                                  _host_path("proc-sys", "/proc/sys")])
    extra["init_containers"] = _dump([sidecar])
    return env, extra


def render_gpu_job(design: ClusterDesign, pool_name: str) -> str:
    env, extra = gpu_job_settings(design, pool_name)
    return render_train_job(design, pool_name, image=versions().images["pytorch-gke"], env=env, gke=extra)


def render_tpu_jobset(design: ClusterDesign, pool_name: str) -> str:
    kd, v = design.kubernetes, versions()
    pool = kd.pool(pool_name)
    tpu = design.pool(pool_name).tpu
    return render("k8s/gke-tpu-jobset.yaml.j2", pool=pool, tpu=tpu, slices=design.pool(pool_name).slices,
                  job=job_name(pool), namespace=kd.namespace, local_queue=kd.local_queue,
                  cluster_queue=kd.cluster_queue, pool_label=POOL_LABEL, api_version=v.charts["jobset"].api_version,
                  image=v.images["jax-tpu"], requirement=v.packages["jax-tpu"], script_dir=SCRIPT_DIR,
                  examples=EXAMPLES_CONFIGMAP, claims=job_claims(design), **JOB_PRIORITY)


def example_files(design: ClusterDesign) -> dict[str, str]:
    """ConfigMap entries: the example job per pool and the scripts they run."""
    files = {}
    for pool in design.pools:
        kpool = design.kubernetes.pool(pool.name)
        files[f"{job_name(kpool)}.yaml"] = render_tpu_jobset(design, pool.name) if pool.tpu else \
            render_gpu_job(design, pool.name)
    if any(not p.tpu for p in design.pools):
        files.update(gpu_job_scripts())
    if any(p.tpu for p in design.pools):
        files["tpu_allreduce.py"] = static("k8s/tpu_allreduce.py")
    return files


def chart_values(design: ClusterDesign) -> dict[str, dict]:
    """Every chart this cluster installs -> its values: Kueue and JobSet, as on EKS, and the NVIDIA
    DRA driver (ComputeDomains) where a pool's NVLink domain spans nodes, pointed at the driver GKE
    installs (NVIDIA_HOST_DIR), as Cluster Toolkit's gke-a4x does."""
    charts = gang_charts()
    if design.kubernetes.nvlink_pools:
        charts["nvidia-dra-driver-gpu"] = dra_driver_values(design.kubernetes, NVIDIA_HOST_DIR)
    return charts


# ---------------------------------------------------------------- the component


@dataclass(frozen=True)
class GkeFilesystem:
    """A filesystem as the CSI driver sees it: its design, the instance id and its Mount."""

    storage: StorageDesign
    instance_id: pulumi.Input[str]     # projects/<p>/locations/<zone>/instances/<name>
    mount: pulumi.Input[Mount]


def lustre_volume(instance_id: str, mount: Mount) -> tuple[str, dict]:
    """(volumeHandle, volumeAttributes) of an existing Managed Lustre instance: <project>/<zone>/<name>,
    the MGS address and the fsname (Managed Lustre CSI driver reference)."""
    parts = instance_id.split("/")
    return f"{parts[1]}/{parts[3]}/{parts[5]}", {"ip": mount.server, "filesystem": mount.remote_path}


def filestore_volume(instance_id: str, mount: Mount) -> tuple[str, dict]:
    """(volumeHandle, volumeAttributes) of an existing Filestore share: modeInstance/<zone>/<name>/<share>."""
    parts = instance_id.split("/")
    share = mount.remote_path.lstrip("/")
    return f"modeInstance/{parts[3]}/{parts[5]}/{share}", {"ip": mount.server, "volume": share}


def node_health_settings(design: ClusterDesign) -> NodeHealthSettings:
    """The GPU health agent on GKE: the driver GKE installs lives under NVIDIA_HOST_DIR on the host
    (bin/nvidia-smi, lib64). The fabric is not counted: GKE multi-networking moves a pod's GPU NICs
    (NetDevice and RDMA device modes) into the pod's network namespace while a job runs, so the
    host's count drops by design; the GPU, ECC, row-remapping, NVLink and Xid checks all run."""
    return NodeHealthSettings(
        "gke", versions().images["node-health"],
        {p.name: expectations(p.gpus, "rdma" if design.pool(p.name).instance.gpu_nic_stack == "rdma" else "gvnic", 0,
                              design.pool(p.name).nvlink_domain_nodes)
         for p in gpu_pools(design.kubernetes.pools)},
        host_path=f"{NVIDIA_HOST_DIR}/bin", host_ld_library_path=f"{NVIDIA_HOST_DIR}/lib64",
        # Flex-start pools run without auto-repair (gke_nodes.py): a NotReady node there would stay.
        taint_only=frozenset(p.pool for p in design.kubernetes.gke.node_pools if p.capacity == "flex-start"))


@dataclass(frozen=True)
class GkeAddonsArgs:
    """What runs inside the GKE cluster: the GPU NIC networks as pod networks, the NIC stack
    installers, Kueue and JobSet, the training namespace, a static volume per filesystem, the
    Kueue queues and the example jobs.

    design: the whole cluster design (`ClusterDesign`), genuinely: the add-ons render the whole
        cluster (the example jobs and Kueue's flavors and quotas from every pool and
        `kubernetes`, the volumes' claims from `storage`, the installers and pod networks from
        `kubernetes.gke`), through the Kubernetes helpers shared with EKS
        (aicluster.kubernetes.in_cluster), which take a ClusterDesign.
    provider: the cluster's Kubernetes provider (GkeCluster.provider).
    networks: GkeNetwork.name -> (VPC name, subnet name) outputs, one per `kubernetes.gke.networks`
        entry (from Network.fabric).
    filesystems: each filesystem's design, instance id and Mount, for its static volume. Default none.
    depends_on: what the in-cluster objects wait for (GkeCluster.ready). Default nothing.
    gsa_emails: PodIdentity.key -> the Google service account email its Kubernetes ServiceAccount
        is annotated with (WorkloadIdentities.emails). Default none.
    """
    design: ClusterDesign
    provider: k8s.Provider
    networks: dict
    filesystems: Sequence[GkeFilesystem] = ()
    depends_on: Sequence[pulumi.Resource] = ()
    gsa_emails: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


class GkeAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: GkeAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:GkeAddons", name, None, opts)
        design, kd = args.design, args.design.kubernetes
        gke = kd.gke
        v = versions()
        after_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))

        for net in gke.networks:
            vpc, subnet = args.networks[net.name]
            params = pulumi.Output.all(vpc, subnet).apply(lambda a, n=net: network_param_set(n, a[0], a[1], design.name))
            param_set = k8s.apiextensions.CustomResource(
                f"{name}-paramset-{net.name}", api_version=NETWORK_API, kind="GKENetworkParamSet",
                metadata=params.apply(lambda d: d["metadata"]), spec=params.apply(lambda d: d["spec"]),
                opts=after_cluster)
            doc = network_object(net, design.name)
            k8s.apiextensions.CustomResource(
                f"{name}-network-{net.name}", api_version=NETWORK_API, kind="Network", metadata=doc["metadata"],
                spec=doc["spec"], opts=pulumi.ResourceOptions.merge(after_cluster,
                                                                    pulumi.ResourceOptions(depends_on=[param_set])))

        for stack in gke.nic_stacks:
            for arch in installer_archs(design, stack):
                doc = yaml.safe_load(render_installer(design, stack, arch))
                k8s.apps.v1.DaemonSet(f"{name}-{installer_name(stack, arch)}", metadata=doc["metadata"],
                                      spec=doc["spec"], opts=after_cluster)

        charts = chart_values(design)
        quota_first: dict[str, list] = {}
        if "nvidia-dra-driver-gpu" in charts:
            # The driver's pods are system-node-critical: their namespace needs GKE's quota first.
            doc = critical_priority_quota(kd, design.name)
            dra_namespace = k8s.core.v1.Namespace(
                f"{name}-dra-namespace", metadata={"name": doc["metadata"]["namespace"],
                                                   "labels": {"aicluster-cluster": design.name}}, opts=after_cluster)
            quota = k8s.core.v1.ResourceQuota(
                f"{name}-dra-critical-pods", metadata=doc["metadata"], spec=doc["spec"],
                opts=pulumi.ResourceOptions.merge(after_cluster, pulumi.ResourceOptions(depends_on=[dra_namespace])))
            quota_first["nvidia-dra-driver-gpu"] = [quota]
        releases = {chart: helm_release(name, v.charts[chart], values, pulumi.ResourceOptions.merge(
                        after_cluster, pulumi.ResourceOptions(depends_on=quota_first.get(chart, []))))
                    for chart, values in charts.items()}
        namespace = training_namespace(name, design, after_cluster)
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])

        for fs in args.filesystems:
            lustre = fs.storage.kind == "managed-lustre"
            volume = pulumi.Output.all(fs.instance_id, fs.mount).apply(
                lambda a, lustre=lustre: (lustre_volume if lustre else filestore_volume)(a[0], a[1]))
            static_volume(name, design, fs.storage, driver=LUSTRE_CSI_DRIVER if lustre else FILESTORE_CSI_DRIVER,
                          volume_handle=volume.apply(lambda x: x[0]), volume_attributes=volume.apply(lambda x: x[1]),
                          mount_options=("relatime", "flock") if lustre else ("hard",), depends_on=[],
                          opts=in_namespace)

        teams = kueue_queues(name, design, pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                                  depends_on=[releases["kueue"], namespace]))
        # The pods' ServiceAccounts, annotated with their Google service accounts
        # (gcp/workload_identity.py), and the datasets' GCS FUSE volumes (the cluster's add-on).
        pod_identities_and_datasets(name, design, {kd.namespace: namespace, **teams}, args.gsa_emails, after_cluster)
        examples_configmap(name, design, example_files(design), in_namespace)
        node_health(f"{name}-health", design.name, kd.pools, node_health_settings(design), after_cluster)
        # Managed collection scrapes what the PodMonitorings select (gcp/observability.py turns it
        # on, and has Cloud Monitoring evaluate the alert rules).
        metrics(f"{name}-metrics", design.name, kd.pools, MetricsSettings("gke", driver_dir=NVIDIA_HOST_DIR),
                after_cluster, kueue=[releases["kueue"]])
        self.register_outputs({"namespace": kd.namespace, "charts": {c: v.charts[c].version for c in releases}})

