"""A collective over every TPU chip of the job: the first thing to run on a new TPU slice.

Run on every host of the slice (one JobSet pod per host). JAX finds the other hosts itself: GKE
gives each pod of a TPU JobSet its worker id and the slice's hostnames, and for several slices
the MEGASCALE_* variables the JobSet sets. It checks that a psum over all chips sees every chip,
then prints the all-reduce bus bandwidth over ICI (and the data-center network between slices).
"""
import os
import time

import jax
import jax.numpy as jnp


def main() -> None:
    jax.distributed.initialize()
    chips = jax.device_count()
    local = jax.local_device_count()
    mib = int(os.environ.get("ALLREDUCE_MIB", "1024"))
    iterations = int(os.environ.get("ALLREDUCE_ITERATIONS", "20"))

    ones = jnp.ones((local,))
    total = jax.pmap(lambda x: jax.lax.psum(x, "chips"), axis_name="chips")(ones)
    if int(total[0]) != chips:
        raise SystemExit(f"psum over {chips} chips returned {total[0]}")

    elements = mib * 2**20 // 4
    data = jnp.zeros((local, elements), dtype=jnp.float32)
    allreduce = jax.pmap(lambda x: jax.lax.psum(x, "chips"), axis_name="chips")
    for _ in range(3):                       # warm-up: compile, connect
        allreduce(data).block_until_ready()
    start = time.perf_counter()
    for _ in range(iterations):
        allreduce(data).block_until_ready()
    seconds = (time.perf_counter() - start) / iterations
    size = elements * 4
    bus_gbps = size * 2 * (chips - 1) / chips / seconds / 1e9
    if jax.process_index() == 0:
        print(f"all-reduce of {mib} MiB over {chips} chips on {jax.process_count()} hosts: "
              f"{seconds * 1e3:.1f} ms, bus bandwidth {bus_gbps:.1f} GB/s")


if __name__ == "__main__":
    main()
