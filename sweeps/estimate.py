"""The dry run's time column: a cell's estimated wall time on the devices it will get.

On CPU small models are overhead-bound, so a cell costs a fixed start (init and compile), a
fixed cost per step and its FLOPs: the least-squares fit of these three to the smoke sweep's
cells on two CPU cores. With a known peak (sweeps/accel/hardware.py): ASSUMED_MFU of it.
"""

from typing import Callable

import jax

from chinchax.sweeps import executors
from chinchax.sweeps.accel import hardware
from chinchax.sweeps.grid import Cell
from chinchax.sweeps.spec import Executor

CPU_CELL_S = 7.0
CPU_STEP_S = 3.3e-3
CPU_FLOPS_PER_S = 4e10  # chinchilla FLOPs
ASSUMED_MFU = 0.3


def time_model(e: Executor) -> tuple[Callable[[Cell], float], str]:
  """(a cell's estimated seconds, how they are estimated)."""
  devices = (executors.cell_devices(e) or [jax.local_devices()[:1]])[0]
  peak = hardware.peak_flops(devices[0])
  if peak:
    rate = ASSUMED_MFU * peak * len(devices)
    return (lambda cell: cell.flops_6ND / rate), (
        f"time at {ASSUMED_MFU:.0%} of the {len(devices)} x {peak:.3g} FLOP/s peak of "
        f"{devices[0].device_kind}")
  return (lambda cell: CPU_CELL_S + cell.steps * CPU_STEP_S
          + cell.flops_chinchilla / CPU_FLOPS_PER_S), (
      f"time on CPU: {CPU_CELL_S:.0f} s per cell, {CPU_STEP_S * 1e3:.1f} ms per step and "
      f"{CPU_FLOPS_PER_S:.2g} FLOP/s (chinchilla), measured for small models on 2 cores")
