"""Recorded-shape exposition text for the alert tests: DCGM, node_exporter, the Slurm exporter, the
aicluster textfile series, for two clusters of the aws-p5-slurm design (pool gpu: 8 x H100 per node,
32 EFA devices = 3200 Gbps wired, /fsx 11.72 GB/s provisioned). Cluster "healthy" sits inside every
threshold; cluster "faulty" carries one seeded fault per alert. Counters grow at a fixed rate from
the moment the sampler starts, as a real exporter's would.

Names and labels follow the exporters' own: dcgm-exporter (gpu, UUID, modelName, Hostname),
node_exporter (node_uname_info; infiniband device/port), the rivosinc Slurm exporter
(slurm_partition_node_count{partition,state}); cluster/pool/node come from the scrape's relabelling.
"""
from __future__ import annotations

import time

EFA_DEVICES = 32

# cluster -> node -> facts
HEALTHY = {f"gpu-{i}": {"gpus": 8, "util": 95, "fabric_gbps": 2000} for i in (1, 2, 3, 4)}
FAULTY = {
    "gpu-1": {"gpus": 8, "util": 95, "fabric_gbps": 200, "xid": (3, 79)},     # slow fabric + XID 79 on GPU 3
    "gpu-2": {"gpus": 8, "util": 95, "fabric_gbps": 2000, "ecc": (5, 2)},     # 2 double-bit errors on GPU 5
    "gpu-3": {"gpus": 7, "util": 95, "fabric_gbps": 2000},                    # a GPU dropped off
    "gpu-4": {"gpus": 0, "util": 95, "fabric_gbps": 2000},                    # DCGM reports nothing
}
CLUSTERS = {
    "healthy": {"nodes": HEALTHY, "lustre_gbs": (3.0, 2.0), "checkpoint_s": 90, "tokens_per_acc": 1100,
                "slurm": {"allocated": 14, "idle": 2, "idle~": 5}},
    "faulty": {"nodes": FAULTY, "lustre_gbs": (7.5, 4.5), "checkpoint_s": 400, "tokens_per_acc": 500,
               "slurm": {"allocated": 12, "drained": 1, "down*": 1, "idle~": 2}},
}
ACCELERATORS = 128


def _line(name: str, labels: dict, value: float) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{body}}} {value:.17g}"


class Sampler:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def text(self) -> str:
        dt = time.monotonic() - self.t0
        out = []
        for cluster, c in CLUSTERS.items():
            for node, n in c["nodes"].items():
                base = {"cluster": cluster, "pool": "gpu", "node": node}
                out.append(_line("node_uname_info", {**base, "nodename": node, "sysname": "Linux"}, 1))
                out.append(_line("node_cpu_seconds_total", {**base, "cpu": "0", "mode": "idle"}, 0.1 * dt))
                for g in range(n["gpus"]):
                    gpu = {**base, "gpu": str(g), "UUID": f"GPU-{cluster}-{node}-{g}", "modelName": "NVIDIA H100 80GB HBM3",
                           "Hostname": node}
                    out.append(_line("DCGM_FI_DEV_GPU_UTIL", gpu, n["util"]))
                    out.append(_line("DCGM_FI_DEV_XID_ERRORS", gpu, n["xid"][1] if n.get("xid", (None,))[0] == g else 0))
                    out.append(_line("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu, n["ecc"][1] if n.get("ecc", (None,))[0] == g else 0))
                    out.append(_line("DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu, 0))
                per_device = n["fabric_gbps"] * 1e9 / 8 / EFA_DEVICES      # bytes/s each way
                for d in range(EFA_DEVICES):
                    dev = {**base, "device": f"efa_{d}", "port": "1"}
                    out.append(_line("aicluster_efa_rx_bytes_total", dev, per_device * dt))
                    out.append(_line("aicluster_efa_tx_bytes_total", dev, per_device * dt))
            read, write = c["lustre_gbs"]
            fs = {"cluster": cluster, "pool": "gpu", "node": "gpu-1", "mount": "/fsx"}
            out.append(_line("aicluster_lustre_client_read_bytes_total", fs, read * 1e9 * dt))
            out.append(_line("aicluster_lustre_client_write_bytes_total", fs, write * 1e9 * dt))
            job = {"cluster": cluster, "pool": "gpu", "node": "gpu-1", "training_job": "llama3-70b"}
            out.append(_line("aicluster_checkpoint_duration_seconds", job, c["checkpoint_s"]))
            out.append(_line("aicluster_training_tokens_per_second", job, c["tokens_per_acc"] * ACCELERATORS))
            out.append(_line("aicluster_training_accelerators", job, ACCELERATORS))
            for state, count in c["slurm"].items():
                out.append(_line("slurm_partition_node_count", {"cluster": cluster, "pool": "head", "node": "head",
                                                               "partition": "gpu", "state": state}, count))
        return "\n".join(out) + "\n"


# (alertname, the labels that tell the firing series apart) expected from cluster "faulty"
EXPECTED_FAULTY = {
    ("AiclusterGpuXidError", ("node", "gpu-1"), ("gpu", "3")),
    ("AiclusterGpuEccUncorrectable", ("node", "gpu-2"), ("gpu", "5")),
    ("AiclusterGpuMissing", ("node", "gpu-3")),
    ("AiclusterGpuMissing", ("node", "gpu-4")),
    ("AiclusterFabricBelowWired", ("node", "gpu-1")),
    ("AiclusterFilesystemNearProvisioned", ("mount", "/fsx")),
    ("AiclusterCheckpointSlow", ("training_job", "llama3-70b")),
    ("AiclusterTokensBelowEstimate", ("training_job", "llama3-70b")),
    ("AiclusterSlurmNodesStuck", ("state", "drained")),
    ("AiclusterSlurmNodesStuck", ("state", "down*")),
}
