"""A distributed all-reduce over every GPU of the job: the first thing to run on a new cluster.

Run by torchrun on each worker (one per node). It prints the bus bandwidth NCCL reaches; with
NCCL_DEBUG=INFO the log names the network it chose ("NET/OFI ... efa" when EFA is in use; a
plain "NET/Socket" means NCCL fell back to TCP).

It also shows the checkpoint contract of the example jobs (resume.py): it starts from the round
recorded in $AICLUSTER_RESUME_FROM, and rank 0 writes the next round's checkpoint under
$AICLUSTER_CHECKPOINT_DIR, as a directory whose name ends in .partial until it is complete, then
renamed, so a restart never resumes from half a checkpoint. A training script does the same with
its model and optimizer state.
"""
import json
import os
import time

import torch
import torch.distributed as dist


STATE_FILE = "state.json"


def resumed_round(resume_from: str) -> int:
    """The round the checkpoint directory `resume_from` recorded (0: none, start from scratch)."""
    if not resume_from:
        return 0
    with open(os.path.join(resume_from, STATE_FILE), encoding="utf-8") as f:
        return int(json.load(f)["round"])


def save_checkpoint(directory: str, state: dict) -> str:
    """Write `state` as <directory>/round-<n>: first under a .partial name, renamed once complete
    (resume.py never picks a .partial entry)."""
    final = os.path.join(directory, f"round-{state['round']:06d}")
    partial = final + ".partial"
    os.makedirs(partial, exist_ok=True)
    with open(os.path.join(partial, STATE_FILE), "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(partial, final)
    return final


def main() -> None:
    resume_from = os.environ.get("AICLUSTER_RESUME_FROM", "")
    first_round = resumed_round(resume_from) + 1
    backend = os.environ.get("ALLREDUCE_BACKEND", "nccl")
    dist.init_process_group(backend)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    world = dist.get_world_size()
    elements = int(os.environ.get("ALLREDUCE_MIB", "1024")) * 2**20 // 4
    iterations = int(os.environ.get("ALLREDUCE_ITERATIONS", "20"))
    check = torch.ones(1, device=device)      # every rank contributes 1: the sum is the world size
    dist.all_reduce(check)
    if int(check.item()) != world:
        raise SystemExit(f"all_reduce returned {check.item()}, expected {world}")
    tensor = torch.zeros(elements, dtype=torch.float32, device=device)
    for _ in range(5):                          # warm-up: connections, buffers
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iterations
    # Bus bandwidth as nccl-tests reports it: each rank moves 2 (n-1)/n of the buffer.
    bus_gbs = tensor.numel() * 4 * 2 * (world - 1) / world / seconds / 1e9
    if dist.get_rank() == 0:
        print(f"round {first_round} (restart {os.environ.get('AICLUSTER_RESTART_COUNT', '0')}): "
              f"all_reduce of {tensor.numel() * 4 / 2**20:.0f} MiB over {world} ranks: "
              f"{seconds * 1e3:.2f} ms, bus bandwidth {bus_gbs:.1f} GB/s", flush=True)
        if os.environ.get("AICLUSTER_CHECKPOINT_DIR"):
            saved = save_checkpoint(os.environ["AICLUSTER_CHECKPOINT_DIR"],
                                    {"round": first_round, "world": world, "bus_gbs": round(bus_gbs, 1)})
            print(f"checkpoint {saved}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
