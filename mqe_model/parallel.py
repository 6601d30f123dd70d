"""Devices: multi-host start-up, the data-parallel mesh, and placing batches on it.

The batch is sharded over every device of every host along its batch axis; parameters and optimizer
state are replicated. XLA (GSPMD) inserts the gradient all-reduce; nothing here is hand-written.
Losses that compare every sample with every other (MQE's B x B backup) ask for the other side whole
with `replicated_in_mesh`, so XLA gathers it once instead of slice by slice.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

logger = logging.getLogger(__name__)

# Any of these means a cluster launcher set the job up for jax.distributed.initialize().
DISTRIBUTED_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS", "SLURM_JOB_ID",
                   "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES")


def maybe_initialize_distributed() -> None:
    """Call `jax.distributed.initialize()` when a cluster environment is detected (multi-host).

    SLURM, Open MPI and Cloud TPU describe the job themselves. Anywhere else, set on every host
    JAX_COORDINATOR_ADDRESS (host:port of process 0), JAX_NUM_PROCESSES and JAX_PROCESS_ID
    (0 .. JAX_NUM_PROCESSES - 1); a ValueError says which one is missing or wrong.
    """
    found = [name for name in DISTRIBUTED_ENV if os.environ.get(name)]
    if not found or os.environ.get("MQE_NO_DISTRIBUTED"):
        return
    if found == ["SLURM_JOB_ID"] and int(os.environ.get("SLURM_NTASKS", "1")) <= 1:
        return  # a single-task SLURM job is one host; nothing to coordinate
    logger.info("initializing jax.distributed (found %s)", ", ".join(found))
    address = os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("COORDINATOR_ADDRESS")
    if address and not {"SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES"} & set(found):
        jax.distributed.initialize(address, *_process_count_and_id())
    else:
        jax.distributed.initialize()


def _process_count_and_id() -> tuple[int, int]:
    values = {}
    for name in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        text = os.environ.get(name, "")
        if not text.strip().isdigit():
            raise ValueError(f"JAX_COORDINATOR_ADDRESS is set, so {name} must be too (a whole number), "
                             f"not {text!r}: set JAX_NUM_PROCESSES to the number of hosts and "
                             "JAX_PROCESS_ID to 0, 1, ... on each")
        values[name] = int(text)
    count, index = values["JAX_NUM_PROCESSES"], values["JAX_PROCESS_ID"]
    if count < 1 or index >= count:
        raise ValueError(f"JAX_PROCESS_ID={index} must be below JAX_NUM_PROCESSES={count}")
    return count, index


def replicated_in_mesh(x: jax.Array) -> jax.Array:
    """`x` whole on every device of the current mesh (inside `jax.set_mesh`); unchanged without one.

    Without this, XLA gathers the operand of an unrolled loop one slice at a time: the fused
    pairwise MRN on 2 devices compiled to one small all-gather per slice instead of one in all.
    """
    if jax.sharding.get_abstract_mesh().empty:
        return x
    return jax.lax.with_sharding_constraint(x, PartitionSpec())


class DataParallel:
    """The mesh over all devices and the shardings of batches and replicated state."""

    def __init__(self, num_devices: int | None = None):
        devices = jax.devices()
        if num_devices is not None:
            if num_devices > len(devices):
                raise ValueError(f"--devices {num_devices}: only {len(devices)} device(s) present")
            devices = devices[:num_devices]
        self.mesh = Mesh(np.asarray(devices), ("data",))
        self.num_devices = len(devices)
        self.replicated = NamedSharding(self.mesh, PartitionSpec())

    def check_batch_size(self, batch_size: int) -> None:
        """Raise unless the global batch splits evenly over devices and hosts."""
        if batch_size % self.num_devices:
            raise ValueError(
                f"batch size {batch_size} does not split over {self.num_devices} devices; "
                f"use a multiple of {self.num_devices} (--set batch_size=...)"
            )

    def batch_sharding(self, batch_axis: int) -> NamedSharding:
        """Sharding of an array whose axis `batch_axis` is the batch."""
        return NamedSharding(self.mesh, PartitionSpec(*([None] * batch_axis), "data"))

    def local_batch_size(self, batch_size: int) -> int:
        """How many samples of a global batch this host draws."""
        return batch_size // jax.process_count()

    def put_batches(self, local: dict[str, np.ndarray], batch_axis: int) -> dict[str, jax.Array]:
        """Global device arrays from this host's part of the batch (axis `batch_axis`)."""
        sharding = self.batch_sharding(batch_axis)

        def put(x: np.ndarray) -> jax.Array:
            global_shape = list(x.shape)
            global_shape[batch_axis] *= jax.process_count()
            return jax.make_array_from_process_local_data(sharding, x, tuple(global_shape))

        return {k: put(v) for k, v in local.items()}

    def replicate(self, tree: Any) -> Any:
        """`tree` placed on every device."""
        return jax.device_put(tree, self.replicated)
